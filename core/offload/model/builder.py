"""Write small .tflite models from Python, for tests, demos and delegate authors.

>>> b = ModelBuilder()
>>> x = b.add_input("x", shape=(1, 4), dtype=np.float32)
>>> y = b.add_tensor("y", shape=(1, 4), dtype=np.float32)
>>> b.add_operator("ADD", inputs=[x, x], outputs=[y], options={"fused_activation_function": "RELU"})
0
>>> b.add_output(y)
>>> content = b.build()

Options are given as the snake_case fields offload's loader reads back (``stride_w``,
``fused_activation_function``, ``new_shape``); every enum by name, as the loader reports it
(``padding="SAME"``, ``weights_format="DEFAULT"``), TensorType fields also as a numpy dtype.
docs/node-options.md lists each op's fields. The options table and its fields come from the
schema by reflection (:mod:`offload._schema`), so every builtin op is covered without a
per-op table, StableHLO ops (whose tables are in the schema's ``BuiltinOptions2``) and string
fields (``VAR_HANDLE``'s ``shared_name``) included; :mod:`offload.model._writer` writes the
bytes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

import numpy as np

from offload._graph import Quantization
from offload._loader import TENSOR_TYPES
from offload._schema import BUILTIN_OPS, encode_option, option_field_map, options_type_for
from offload.errors import ModelBuildError
from offload.model._writer import OperatorSpec, TensorSpec, write_model

__all__ = ["ModelBuilder", "SubgraphBuilder", "option_names", "options_type_for"]

DTypeLike: TypeAlias = "np.dtype[Any] | type | str"
QuantizationLike: TypeAlias = "tuple[Any, Any] | Quantization | None"

# numpy dtype -> TensorType; the first TensorType per dtype wins (INT8 over INT4, UINT16 over
# BFLOAT16, STRING for object arrays). Other TensorTypes are named as strings ("INT4").
_TYPE_IDS_BY_NAME: dict[str, int] = {name: i for i, (name, _) in TENSOR_TYPES.items()}
_TYPE_IDS_BY_DTYPE: dict[np.dtype, int] = {}
for _type_id, (_, _dtype) in TENSOR_TYPES.items():
    _TYPE_IDS_BY_DTYPE.setdefault(_dtype, _type_id)


def option_names(op: str) -> tuple[str, ...]:
    """The fields of ``op``'s builtin options table, by the names ``node.options`` and
    :meth:`SubgraphBuilder.add_operator` use; ``()`` for an op whose table has none (or that
    has no table: see :func:`options_type_for`).

    A node read from a file whose operator carries no options table has ``node.options``
    of type ``NoOptions`` even when its op has fields; a delegate whose runtime reads those
    fields from the file can tell such nodes apart with this.
    """
    type_name = options_type_for(op)
    if type_name is None:
        return ()
    return tuple(name for name, f in option_field_map(type_name).items() if f.kind != "table")


def _tensor_type(dtype: Any, what: str) -> int:
    if isinstance(dtype, str):
        if dtype.upper() in _TYPE_IDS_BY_NAME:
            return _TYPE_IDS_BY_NAME[dtype.upper()]
    try:
        np_dtype = np.dtype(dtype)
    except TypeError:
        np_dtype = None
    if np_dtype is not None and np_dtype in _TYPE_IDS_BY_DTYPE:
        return _TYPE_IDS_BY_DTYPE[np_dtype]
    raise ModelBuildError(
        f"{what}: expected a numpy dtype or a TensorType name "
        f"({', '.join(sorted(_TYPE_IDS_BY_NAME))}), found {dtype!r}"
    )


def _shape(shape: Sequence[int], what: str, allow_dynamic: bool = False) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise ModelBuildError(f"{what}: expected a sequence of ints, found {shape!r}") from None
    low = -1 if allow_dynamic else 0
    if any(d < low for d in dims):
        raise ModelBuildError(f"{what}: dimensions must be >= {low}, found {list(dims)}")
    return dims


def _quantization(
    quantization: QuantizationLike, quantized_dimension: int, what: str
) -> Quantization | None:
    if quantization is None:
        return None
    if isinstance(quantization, Quantization):
        return quantization
    try:
        scale, zero_point = quantization
    except (TypeError, ValueError):
        raise ModelBuildError(
            f"{what}: quantization must be (scale, zero_point) or an offload Quantization, "
            f"found {quantization!r}"
        ) from None
    scale_arr = np.atleast_1d(np.asarray(scale, np.float32)).ravel()
    zp_arr = np.atleast_1d(np.asarray(zero_point, np.int64)).ravel()
    if zp_arr.size == 1 and scale_arr.size > 1:
        zp_arr = np.full(scale_arr.shape, zp_arr[0], np.int64)
    if scale_arr.size != zp_arr.size:
        raise ModelBuildError(
            f"{what}: quantization has {scale_arr.size} scales but {zp_arr.size} zero points"
        )
    return Quantization(scale_arr, zp_arr, int(quantized_dimension))


class SubgraphBuilder:
    """The tensors and operators of one subgraph; get one from :meth:`ModelBuilder.add_subgraph`.

    Tensor and operator indices returned here are the indices in the written file.
    """

    def __init__(self, model: ModelBuilder, name: str = "") -> None:
        self.model = model
        self.name = name
        self.tensors: list[TensorSpec] = []
        self.operators: list[OperatorSpec] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []

    def add_tensor(
        self,
        name: str,
        shape: Sequence[int],
        dtype: DTypeLike = np.float32,
        *,
        quantization: QuantizationLike = None,
        quantized_dimension: int = 0,
        shape_signature: Sequence[int] | None = None,
        is_variable: bool = False,
    ) -> int:
        """Add a runtime tensor and return its index.

        ``quantization`` is ``(scale, zero_point)``: scalars per tensor, arrays per channel
        along ``quantized_dimension``. ``shape_signature`` may hold -1 for dynamic dimensions.
        """
        what = f"tensor {name!r}"
        return self._add(
            TensorSpec(
                name=name,
                shape=_shape(shape, what),
                type_id=_tensor_type(dtype, what),
                buffer=0,
                quantization=_quantization(quantization, quantized_dimension, what),
                shape_signature=(
                    None
                    if shape_signature is None
                    else _shape(shape_signature, f"{what} shape_signature", allow_dynamic=True)
                ),
                is_variable=is_variable,
            )
        )

    def add_input(
        self,
        name: str,
        shape: Sequence[int],
        dtype: DTypeLike = np.float32,
        *,
        quantization: QuantizationLike = None,
        quantized_dimension: int = 0,
        shape_signature: Sequence[int] | None = None,
    ) -> int:
        """Add a tensor and make it the next subgraph input; return its index."""
        index = self.add_tensor(
            name,
            shape,
            dtype,
            quantization=quantization,
            quantized_dimension=quantized_dimension,
            shape_signature=shape_signature,
        )
        self.inputs.append(index)
        return index

    def add_constant(
        self,
        name: str,
        data: np.ndarray | bytes,
        *,
        dtype: DTypeLike | None = None,
        shape: Sequence[int] | None = None,
        quantization: QuantizationLike = None,
        quantized_dimension: int = 0,
    ) -> int:
        """Add a constant tensor holding ``data`` (stored 16-byte aligned); return its index.

        ``data`` is an array (its dtype and shape are used unless given), or raw bytes with
        ``dtype`` and ``shape`` both given (packed INT4, STRING and other raw layouts).
        """
        what = f"constant {name!r}"
        if isinstance(data, (bytes, bytearray, memoryview)):
            if dtype is None or shape is None:
                raise ModelBuildError(f"{what}: raw bytes need both dtype and shape")
            raw = bytes(data)
            dims = _shape(shape, what)
            type_id = _tensor_type(dtype, what)
        else:
            array = np.asarray(data)
            type_id = _tensor_type(array.dtype if dtype is None else dtype, what)
            _, expected = TENSOR_TYPES[type_id]
            if expected == np.dtype(object):
                raise ModelBuildError(
                    f"{what}: {TENSOR_TYPES[type_id][0]} constants must be given as raw bytes"
                )
            array = array.astype(expected.newbyteorder("<"), copy=False)
            dims = array.shape if shape is None else _shape(shape, what)
            if int(np.prod(dims)) != array.size:
                raise ModelBuildError(
                    f"{what}: shape {list(dims)} holds {int(np.prod(dims))} values, "
                    f"but data has {array.size}"
                )
            raw = np.ascontiguousarray(array).tobytes()
        return self._add(
            TensorSpec(
                name=name,
                shape=tuple(dims),
                type_id=type_id,
                buffer=self.model._add_buffer(raw),
                quantization=_quantization(quantization, quantized_dimension, what),
                shape_signature=None,
                is_variable=False,
            )
        )

    def add_output(self, tensor: int) -> None:
        """Mark an existing tensor as the next subgraph output."""
        self.outputs.append(self._check_index(tensor, "add_output"))

    def add_operator(
        self,
        op: str,
        inputs: Sequence[int],
        outputs: Sequence[int],
        options: Mapping[str, Any] | None = None,
        *,
        version: int = 1,
        custom: bool = False,
        custom_options: bytes = b"",
        intermediates: Sequence[int] = (),
    ) -> int:
        """Add an operator and return its index.

        ``op`` is a builtin name (``"CONV_2D"``) or, with ``custom=True``, a custom code.
        ``inputs`` may hold -1 for an omitted optional input.
        """
        if custom:
            if options:
                raise ModelBuildError(
                    f"custom op {op!r}: custom ops take custom_options bytes, not options"
                )
            options_type = None
            opcode = self.model._opcode(BUILTIN_OPS["CUSTOM"], op, version)
        else:
            if op not in BUILTIN_OPS or op == "CUSTOM":
                close = [n for n in BUILTIN_OPS if n.startswith(op.upper()[:3])][:8]
                hint = f"; similar: {', '.join(close)}" if close else ""
                raise ModelBuildError(
                    f"unknown builtin op {op!r}: expected a tflite.BuiltinOperator name such as "
                    f"'CONV_2D'{hint} (pass custom=True for a custom op)"
                )
            if custom_options:
                raise ModelBuildError(f"{op}: custom_options are only for custom ops")
            options_type = options_type_for(op)
            if options and options_type is None:
                raise ModelBuildError(
                    f"{op}: this op has no builtin options, found {dict(options)}"
                )
            opcode = self.model._opcode(BUILTIN_OPS[op], None, version)
        checked_options = _check_options(op, options_type, options or {})
        where = f"{op} operator {len(self.operators)}"
        self.operators.append(
            OperatorSpec(
                opcode=opcode,
                inputs=tuple(self._check_index(i, f"{where} input", optional=True) for i in inputs),
                outputs=tuple(self._check_index(i, f"{where} output") for i in outputs),
                options_type=options_type,
                options=checked_options,
                custom_options=bytes(custom_options),
                intermediates=tuple(
                    self._check_index(i, f"{where} intermediate") for i in intermediates
                ),
            )
        )
        return len(self.operators) - 1

    def _add(self, spec: TensorSpec) -> int:
        self.tensors.append(spec)
        return len(self.tensors) - 1

    def _check_index(self, index: int, what: str, optional: bool = False) -> int:
        n = len(self.tensors)
        if optional and index == -1:
            return -1
        if not isinstance(index, (int, np.integer)) or not 0 <= index < n:
            valid = f"0..{n - 1}" if n else "none yet"
            extra = ", or -1 for an omitted input" if optional else ""
            raise ModelBuildError(
                f"{what}: tensor index {index!r} is out of range; the subgraph has {n} tensors "
                f"(valid: {valid}{extra})"
            )
        return int(index)


def _check_options(op: str, options_type: str | None, options: Mapping[str, Any]) -> dict[str, Any]:
    """Validate option names and values; enums given by name become their numbers."""
    if options_type is None:
        return {}
    # Nested tables are not settable from a dict; no options table of the schema has one.
    settable = option_field_map(options_type).items()
    fields = {name: f for name, f in settable if f.kind != "table"}
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key not in fields:
            raise ModelBuildError(
                f"{op}: unknown option {key!r} for {options_type}; valid fields are "
                f"{sorted(fields) or 'none'}"
            )
        field = fields[key]
        if field.kind == "string":
            if not isinstance(value, str):
                raise ModelBuildError(f"{op}: option {key} expects a str, found {value!r}")
            out[key] = value
            continue
        if field.enum == "TensorType" and not isinstance(value, (int, np.integer)):
            value = _tensor_type(value, f"{op} option {key}")
        elif field.enum is not None and isinstance(value, str):
            try:
                value = encode_option(field, value)
            except KeyError:
                raise ModelBuildError(
                    f"{op}: option {key}={value!r} is not one of {sorted(field.choices)}"
                ) from None
        if field.kind == "vector":
            value = np.asarray(value, dtype=field.dtype).ravel()
        elif isinstance(value, str):
            raise ModelBuildError(f"{op}: option {key} expects a number, found {value!r}")
        out[key] = value
    return out


class ModelBuilder(SubgraphBuilder):
    """Build a .tflite model: tensors, operators, signature and metadata, then :meth:`build`.

    A ModelBuilder is itself the builder of the main subgraph (subgraph 0), so its ``add_*``
    methods add to that; :meth:`add_subgraph` returns a :class:`SubgraphBuilder` for more
    (the bodies of WHILE, IF, CALL_ONCE). A ``serving_default`` signature over the main
    subgraph's inputs and outputs (named after their tensors) is written unless
    ``signature_key`` is None.
    """

    def __init__(
        self,
        description: str = "offload.model.builder",
        *,
        signature_key: str | None = "serving_default",
    ) -> None:
        super().__init__(self, "main")
        self.description = description
        self.signature_key = signature_key
        self._buffers: list[bytes] = [b""]  # buffer 0: the empty sentinel every runtime tensor uses
        self._opcodes: dict[tuple[int, str | None, int], int] = {}
        self._metadata: dict[str, int] = {}
        self.subgraphs: list[SubgraphBuilder] = [self]

    def add_subgraph(self, name: str = "") -> SubgraphBuilder:
        """Add another subgraph; its index is ``len(builder.subgraphs) - 1``."""
        self.subgraphs.append(SubgraphBuilder(self, name))
        return self.subgraphs[-1]

    def add_metadata(self, name: str, data: bytes) -> None:
        """Add a metadata entry (``name`` -> bytes), e.g. ``min_runtime_version``."""
        if name in self._metadata:
            raise ModelBuildError(f"metadata entry {name!r} was already added")
        self._metadata[name] = self._add_buffer(bytes(data))

    def build(self) -> bytes:
        """The model as .tflite bytes."""
        return write_model(self)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the model to ``path``."""
        with open(path, "wb") as f:
            f.write(self.build())

    def _add_buffer(self, data: bytes) -> int:
        self._buffers.append(data)
        return len(self._buffers) - 1

    def _opcode(self, builtin: int, custom: str | None, version: int) -> int:
        if version < 1:
            raise ModelBuildError(f"op version must be >= 1, found {version}")
        return self._opcodes.setdefault((builtin, custom, int(version)), len(self._opcodes))

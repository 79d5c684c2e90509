"""Write small .tflite models from Python, for tests, demos and delegate authors.

>>> b = ModelBuilder()
>>> x = b.add_input("x", shape=(1, 4), dtype=np.float32)
>>> y = b.add_tensor("y", shape=(1, 4), dtype=np.float32)
>>> b.add_operator("ADD", inputs=[x, x], outputs=[y], options={"fused_activation_function": "RELU"})
0
>>> b.add_output(y)
>>> content = b.build()

Options are given as the snake_case fields offload's loader reads back (``stride_w``,
``fused_activation_function``, ``new_shape``); enums by name (``padding="SAME"``). The options
table for an op is found from its name (``CONV_2D`` -> ``Conv2DOptions``) and its fields are
written through the generated ``<Options>Add<Field>`` functions of the ``tflite`` package, so
every builtin op with scalar or vector options is covered without a per-op table.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import flatbuffers
import numpy as np
import tflite

from offload._graph import Quantization
from offload._loader import TENSOR_TYPES, snake_case
from offload.errors import ModelBuildError

__all__ = ["ModelBuilder", "SubgraphBuilder", "options_type_for"]

DTypeLike: TypeAlias = "np.dtype[Any] | type | str"
QuantizationLike: TypeAlias = "tuple[Any, Any] | Quantization | None"

_FILE_IDENTIFIER = b"TFL3"
_BUFFER_ALIGNMENT = 16
_PLACEHOLDER_FOR_GREATER_OP_CODES = 127


def _enum_values(enum_cls: type) -> dict[str, int]:
    return {k: v for k, v in vars(enum_cls).items() if not k.startswith("_") and isinstance(v, int)}


_BUILTIN_OPS = _enum_values(tflite.BuiltinOperator)
_OPTION_TYPES = _enum_values(tflite.BuiltinOptions)

# Ops whose options table is not named after the op (after dropping underscores and case).
_IRREGULAR_OPTIONS: dict[str, str] = {
    "AVERAGE_POOL_2D": "Pool2DOptions",
    "MAX_POOL_2D": "Pool2DOptions",
    "L2_POOL_2D": "Pool2DOptions",
    "L2_NORMALIZATION": "L2NormOptions",
    "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
    "MEAN": "ReducerOptions",
    "SUM": "ReducerOptions",
    "REDUCE_PROD": "ReducerOptions",
    "REDUCE_MAX": "ReducerOptions",
    "REDUCE_MIN": "ReducerOptions",
    "REDUCE_ANY": "ReducerOptions",
    "REDUCE_ALL": "ReducerOptions",
    "MAXIMUM": "MaximumMinimumOptions",
    "MINIMUM": "MaximumMinimumOptions",
    "CONV_3D_TRANSPOSE": "Conv3DOptions",
    "RANDOM_STANDARD_NORMAL": "RandomOptions",
    "RANDOM_UNIFORM": "RandomOptions",
    "MULTINOMIAL": "RandomOptions",
}
_OPTION_TYPES_FOLDED = {name.lower(): name for name in _OPTION_TYPES}

# Option fields given by enum name, as the loader reports them.
_ENUM_FIELDS: dict[str, dict[str, int]] = {
    "padding": _enum_values(tflite.Padding),
    "fused_activation_function": _enum_values(tflite.ActivationFunctionType),
    "kernel_type": _enum_values(tflite.LSTMKernelType),
}
_MIRROR_PAD_MODES = _enum_values(tflite.MirrorPadMode)
# Option fields holding a TensorType: given as a numpy dtype or a TensorType name.
_TENSOR_TYPE_FIELDS = {
    "quantized_bias_type",
    "out_type",
    "output_type",
    "idx_out_type",
    "in_data_type",
    "out_data_type",
}

_NUMBER_TYPES: dict[str, np.dtype] = {
    "Bool": np.dtype(np.bool_),
    "Int8": np.dtype(np.int8),
    "Uint8": np.dtype(np.uint8),
    "Int16": np.dtype(np.int16),
    "Uint16": np.dtype(np.uint16),
    "Int32": np.dtype(np.int32),
    "Uint32": np.dtype(np.uint32),
    "Int64": np.dtype(np.int64),
    "Uint64": np.dtype(np.uint64),
    "Float32": np.dtype(np.float32),
    "Float64": np.dtype(np.float64),
}

# numpy dtype -> TensorType; the first TensorType per dtype wins (INT8 over INT4, UINT16 over
# BFLOAT16, STRING for object arrays). Other TensorTypes are named as strings ("INT4").
_TYPE_IDS_BY_NAME: dict[str, int] = {name: i for i, (name, _) in TENSOR_TYPES.items()}
_TYPE_IDS_BY_DTYPE: dict[np.dtype, int] = {}
for _type_id, (_, _dtype) in TENSOR_TYPES.items():
    _TYPE_IDS_BY_DTYPE.setdefault(_dtype, _type_id)


def options_type_for(op: str) -> str | None:
    """The BuiltinOptions table name for a builtin op name, or None if the op has no options."""
    if op in _IRREGULAR_OPTIONS:
        return _IRREGULAR_OPTIONS[op]
    return _OPTION_TYPES_FOLDED.get(op.replace("_", "").lower() + "options")


@dataclass(frozen=True)
class _Field:
    """One field of an options table: how to write it and, for vectors, the element dtype."""

    adder: Any
    vector_dtype: np.dtype | None


@functools.cache
def _option_fields(type_name: str) -> dict[str, _Field]:
    """snake_case field name -> writer, from the generated ``<Type>Add<Field>`` functions."""
    prefix = f"{type_name}Add"
    reader_cls = getattr(tflite, type_name)
    fields: dict[str, _Field] = {}
    for name, fn in vars(tflite).items():
        if not name.startswith(prefix) or not callable(fn):
            continue
        camel = name[len(prefix) :]
        vector_dtype = None
        if hasattr(reader_cls, f"{camel}Length"):
            source = inspect.getsource(getattr(reader_cls, camel))
            match = re.search(r"number_types\.(\w+)Flags, a \+", source)
            if match is None or match.group(1) not in _NUMBER_TYPES:
                continue  # a vector of tables or strings: not settable from a dict
            vector_dtype = _NUMBER_TYPES[match.group(1)]
        elif "UOffsetTRelativeSlot" in inspect.getsource(fn):
            continue  # a string or nested table field
        fields[snake_case(camel)] = _Field(fn, vector_dtype)
    return fields


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


@dataclass
class _TensorSpec:
    name: str
    shape: tuple[int, ...]
    type_id: int
    buffer: int
    quantization: Quantization | None
    shape_signature: tuple[int, ...] | None
    is_variable: bool


@dataclass
class _OperatorSpec:
    opcode: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options_type: str | None
    options: dict[str, Any]
    custom_options: bytes
    intermediates: tuple[int, ...]


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
        self.tensors: list[_TensorSpec] = []
        self.operators: list[_OperatorSpec] = []
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
            _TensorSpec(
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
            _TensorSpec(
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
            opcode = self.model._opcode(_BUILTIN_OPS["CUSTOM"], op, version)
        else:
            if op not in _BUILTIN_OPS or op == "CUSTOM":
                close = [n for n in _BUILTIN_OPS if n.startswith(op.upper()[:3])][:8]
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
            opcode = self.model._opcode(_BUILTIN_OPS[op], None, version)
        checked_options = _check_options(op, options_type, options or {})
        where = f"{op} operator {len(self.operators)}"
        self.operators.append(
            _OperatorSpec(
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

    def _add(self, spec: _TensorSpec) -> int:
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
    """Validate option names and convert enum names to their values."""
    if options_type is None:
        return {}
    fields = _option_fields(options_type)
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key not in fields:
            raise ModelBuildError(
                f"{op}: unknown option {key!r} for {options_type}; valid fields are "
                f"{sorted(fields) or 'none'}"
            )
        enum = _ENUM_FIELDS.get(key)
        if key == "mode" and options_type == "MirrorPadOptions":
            enum = _MIRROR_PAD_MODES
        if enum is not None and isinstance(value, str):
            if value not in enum:
                raise ModelBuildError(f"{op}: option {key}={value!r} is not one of {sorted(enum)}")
            value = enum[value]
        elif key in _TENSOR_TYPE_FIELDS and not isinstance(value, (int, np.integer)):
            value = _tensor_type(value, f"{op} option {key}")
        spec = fields[key]
        if spec.vector_dtype is not None:
            value = np.asarray(value, dtype=spec.vector_dtype).ravel()
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
        return _write(self)

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


# -- flatbuffer writing --------------------------------------------------------------------
# The flatbuffers builder writes back to front and forbids nesting, so every vector, string
# and child table is created before the table that refers to it.


def _int_vector(b: flatbuffers.Builder, values: Sequence[int], dtype: Any = np.int32) -> int:
    return b.CreateNumpyVector(np.asarray(values, dtype=dtype).ravel())


def _aligned_bytes(b: flatbuffers.Builder, data: bytes) -> int:
    b.StartVector(1, len(data), _BUFFER_ALIGNMENT)
    b.head = b.head - len(data)
    b.Bytes[b.head : b.head + len(data)] = data
    b.vectorNumElems = len(data)
    return b.EndVector()


def _write_options(b: flatbuffers.Builder, type_name: str, options: Mapping[str, Any]) -> int:
    fields = _option_fields(type_name)
    vectors = {
        key: b.CreateNumpyVector(value)
        for key, value in options.items()
        if fields[key].vector_dtype is not None
    }
    getattr(tflite, f"{type_name}Start")(b)
    for key, value in options.items():
        fields[key].adder(b, vectors.get(key, value))
    return getattr(tflite, f"{type_name}End")(b)


def _write_quantization(b: flatbuffers.Builder, q: Quantization) -> int:
    scale = b.CreateNumpyVector(np.asarray(q.scale, np.float32).ravel())
    zero_point = b.CreateNumpyVector(np.asarray(q.zero_point, np.int64).ravel())
    tflite.QuantizationParametersStart(b)
    tflite.QuantizationParametersAddScale(b, scale)
    tflite.QuantizationParametersAddZeroPoint(b, zero_point)
    tflite.QuantizationParametersAddQuantizedDimension(b, q.quantized_dimension)
    return tflite.QuantizationParametersEnd(b)


def _write_tensor(b: flatbuffers.Builder, t: _TensorSpec) -> int:
    name = b.CreateString(t.name)
    shape = _int_vector(b, t.shape)
    signature = _int_vector(b, t.shape_signature) if t.shape_signature is not None else None
    quant = _write_quantization(b, t.quantization) if t.quantization is not None else None
    tflite.TensorStart(b)
    tflite.TensorAddShape(b, shape)
    tflite.TensorAddType(b, t.type_id)
    tflite.TensorAddBuffer(b, t.buffer)
    tflite.TensorAddName(b, name)
    if quant is not None:
        tflite.TensorAddQuantization(b, quant)
    if t.is_variable:
        tflite.TensorAddIsVariable(b, True)
    if signature is not None:
        tflite.TensorAddShapeSignature(b, signature)
    return tflite.TensorEnd(b)


def _write_operator(b: flatbuffers.Builder, op: _OperatorSpec) -> int:
    inputs = _int_vector(b, op.inputs)
    outputs = _int_vector(b, op.outputs)
    intermediates = _int_vector(b, op.intermediates) if op.intermediates else None
    options = _write_options(b, op.options_type, op.options) if op.options_type else None
    custom = (
        b.CreateNumpyVector(np.frombuffer(op.custom_options, np.uint8))
        if op.custom_options
        else None
    )
    tflite.OperatorStart(b)
    tflite.OperatorAddOpcodeIndex(b, op.opcode)
    tflite.OperatorAddInputs(b, inputs)
    tflite.OperatorAddOutputs(b, outputs)
    if options is not None:
        tflite.OperatorAddBuiltinOptionsType(b, _OPTION_TYPES[op.options_type])
        tflite.OperatorAddBuiltinOptions(b, options)
    if custom is not None:
        tflite.OperatorAddCustomOptions(b, custom)
    if intermediates is not None:
        tflite.OperatorAddIntermediates(b, intermediates)
    return tflite.OperatorEnd(b)


def _vector_of_tables(b: flatbuffers.Builder, offsets: Sequence[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for offset in reversed(offsets):
        b.PrependUOffsetTRelative(offset)
    return b.EndVector()


def _write_subgraph(b: flatbuffers.Builder, sg: SubgraphBuilder) -> int:
    tensors = _vector_of_tables(b, [_write_tensor(b, t) for t in sg.tensors])
    operators = _vector_of_tables(b, [_write_operator(b, op) for op in sg.operators])
    inputs = _int_vector(b, sg.inputs)
    outputs = _int_vector(b, sg.outputs)
    name = b.CreateString(sg.name)
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, tensors)
    tflite.SubGraphAddInputs(b, inputs)
    tflite.SubGraphAddOutputs(b, outputs)
    tflite.SubGraphAddOperators(b, operators)
    tflite.SubGraphAddName(b, name)
    return tflite.SubGraphEnd(b)


def _write_signature(b: flatbuffers.Builder, key: str, sg: SubgraphBuilder) -> int:
    def tensor_maps(indices: Sequence[int]) -> int:
        maps = []
        for index in indices:
            name = b.CreateString(sg.tensors[index].name)
            tflite.TensorMapStart(b)
            tflite.TensorMapAddName(b, name)
            tflite.TensorMapAddTensorIndex(b, index)
            maps.append(tflite.TensorMapEnd(b))
        return _vector_of_tables(b, maps)

    for kind, indices in (("input", sg.inputs), ("output", sg.outputs)):
        names = [sg.tensors[i].name for i in indices]
        if len(set(names)) != len(names):
            raise ModelBuildError(
                f"signature {key!r}: {kind} tensors need distinct names, found {names}; rename "
                "them or pass signature_key=None"
            )
    inputs = tensor_maps(sg.inputs)
    outputs = tensor_maps(sg.outputs)
    key_offset = b.CreateString(key)
    tflite.SignatureDefStart(b)
    tflite.SignatureDefAddInputs(b, inputs)
    tflite.SignatureDefAddOutputs(b, outputs)
    tflite.SignatureDefAddSignatureKey(b, key_offset)
    tflite.SignatureDefAddSubgraphIndex(b, 0)
    return tflite.SignatureDefEnd(b)


def _write(mb: ModelBuilder) -> bytes:
    b = flatbuffers.Builder(1024 + sum(len(d) + _BUFFER_ALIGNMENT for d in mb._buffers))

    buffer_tables = []
    for data in mb._buffers:
        vec = _aligned_bytes(b, data) if data else None
        tflite.BufferStart(b)
        if vec is not None:
            tflite.BufferAddData(b, vec)
        buffer_tables.append(tflite.BufferEnd(b))
    buffers = _vector_of_tables(b, buffer_tables)

    opcode_tables = []
    for (builtin, custom, version), _ in sorted(mb._opcodes.items(), key=lambda kv: kv[1]):
        custom_offset = b.CreateString(custom) if custom is not None else None
        tflite.OperatorCodeStart(b)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(
            b, min(builtin, _PLACEHOLDER_FOR_GREATER_OP_CODES)
        )
        tflite.OperatorCodeAddBuiltinCode(b, builtin)
        tflite.OperatorCodeAddVersion(b, version)
        if custom_offset is not None:
            tflite.OperatorCodeAddCustomCode(b, custom_offset)
        opcode_tables.append(tflite.OperatorCodeEnd(b))
    opcodes = _vector_of_tables(b, opcode_tables)

    subgraphs = _vector_of_tables(b, [_write_subgraph(b, sg) for sg in mb.subgraphs])

    metadata_tables = []
    for name, buffer_index in mb._metadata.items():
        name_offset = b.CreateString(name)
        tflite.MetadataStart(b)
        tflite.MetadataAddName(b, name_offset)
        tflite.MetadataAddBuffer(b, buffer_index)
        metadata_tables.append(tflite.MetadataEnd(b))
    metadata = _vector_of_tables(b, metadata_tables) if metadata_tables else None

    signatures = (
        _vector_of_tables(b, [_write_signature(b, mb.signature_key, mb)])
        if mb.signature_key is not None
        else None
    )
    description = b.CreateString(mb.description)

    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, opcodes)
    tflite.ModelAddSubgraphs(b, subgraphs)
    tflite.ModelAddDescription(b, description)
    tflite.ModelAddBuffers(b, buffers)
    if metadata is not None:
        tflite.ModelAddMetadata(b, metadata)
    if signatures is not None:
        tflite.ModelAddSignatureDefs(b, signatures)
    b.Finish(tflite.ModelEnd(b), file_identifier=_FILE_IDENTIFIER)
    return bytes(b.Output())

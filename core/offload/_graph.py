"""The immutable in-memory graph that every part of offload works on.

A :class:`Model` holds :class:`Subgraph` objects, each with :class:`Tensor` and :class:`Node`
tables indexed exactly as in the .tflite file, so tensor and node indices printed by offload
are the ones LiteRT prints.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from offload.errors import ModelLoadError

ModelType = Literal["float32", "float16", "dynamic_range", "int8", "qat"]
MODEL_TYPES: tuple[ModelType, ...] = ("float32", "float16", "dynamic_range", "int8", "qat")


@dataclass(frozen=True)
class Quantization:
    """Affine quantization: ``real = scale * (q - zero_point)``, per tensor or per channel."""

    scale: np.ndarray
    zero_point: np.ndarray
    quantized_dimension: int = 0

    @property
    def per_channel(self) -> bool:
        return self.scale.size > 1

    def as_tuple(self) -> tuple[float, int]:
        """LiteRT's legacy ``quantization`` field: per-tensor (scale, zero_point), else (0.0, 0)."""
        if self.scale.size == 1:
            return float(self.scale[0]), int(self.zero_point[0]) if self.zero_point.size else 0
        return 0.0, 0


@dataclass(frozen=True)
class DimensionMetadata:
    """One sparse-tensor dimension: DENSE (``dense_size``) or SPARSE_CSR (segments, indices)."""

    format: Literal["DENSE", "SPARSE_CSR"]
    dense_size: int
    array_segments: np.ndarray | None
    array_indices: np.ndarray | None


@dataclass(frozen=True)
class Sparsity:
    """TACO-style sparse storage of a constant tensor (TFLite's SparsityParameters)."""

    traversal_order: tuple[int, ...]
    block_map: tuple[int, ...]
    dim_metadata: tuple[DimensionMetadata, ...]


@dataclass(frozen=True, eq=False)
class Tensor:
    """One entry of a subgraph's tensor table.

    ``data`` is a read-only view into the model bytes for constant tensors, else None.
    """

    index: int
    name: str
    shape: tuple[int, ...]
    shape_signature: tuple[int, ...]
    dtype: np.dtype
    type_name: str
    quantization: Quantization | None
    sparsity: Sparsity | None
    data: np.ndarray | None
    is_variable: bool = False

    @property
    def is_constant(self) -> bool:
        """The file gives the tensor data: a weight, or a variable's first value."""
        return self.data is not None

    @property
    def is_dense_constant(self) -> bool:
        """A weight a kernel can read as an array shaped as the tensor: constant, not a
        variable (whose data is only its first value: state), not in sparse storage (one no
        DENSIFY expanded). Folded constants (see ``offload.export_partition``) count: the core
        gives them as constants of the subgraph a delegate receives."""
        return self.data is not None and not self.is_variable and self.sparsity is None

    def constant_value(self) -> np.ndarray:
        """The constant's values shaped as the tensor (sparse constants stay in storage form)."""
        if self.data is None:
            raise ValueError(f"tensor {self.index} ({self.name!r}) is not a constant")
        if self.type_name == "STRING" and self.sparsity is None:
            return _decode_strings(self, self.data)
        if self.sparsity is not None or self.dtype == np.dtype(object):
            return self.data
        return self.data.reshape(self.shape)


def _decode_strings(t: Tensor, raw: np.ndarray) -> np.ndarray:
    """A STRING constant's buffer (count, count + 1 offsets, then the bytes) as the object array
    of ``bytes`` string tensors hold, every count and offset checked against the buffer first:
    the file is untrusted."""
    data = raw.reshape(-1).view(np.uint8).tobytes()
    where = f"string constant {t.index} ({t.name!r})"
    expected = int(np.prod(t.shape, dtype=np.int64))
    if len(data) < 4:
        raise ModelLoadError(f"{where}: expected a buffer of at least 4 bytes, found {len(data)}")
    count = int.from_bytes(data[:4], "little", signed=True)
    if count != expected:
        raise ModelLoadError(
            f"{where}: expected {expected} strings for shape {list(t.shape)}, found a count of "
            f"{count}"
        )
    header = 4 * (count + 2)
    if header > len(data):
        raise ModelLoadError(
            f"{where}: {count} strings need a {header}-byte header, the buffer has {len(data)}"
        )
    offsets = np.frombuffer(data, "<i4", count + 1, 4).astype(np.int64)
    if offsets[0] < header or np.any(np.diff(offsets) < 0) or offsets[-1] > len(data):
        raise ModelLoadError(
            f"{where}: expected offsets rising from {header} to at most {len(data)}, found "
            f"{offsets[:8].tolist()}{'...' if count > 7 else ''}"
        )
    values = np.empty(count, dtype=object)
    for k in range(count):
        values[k] = data[offsets[k] : offsets[k + 1]]
    return values.reshape(t.shape)


class OpOptions(Mapping[str, Any]):
    """An op's builtin options (``node.options``), read once from the flatbuffer.

    Read a field as an attribute (``node.options.stride_w``) or as a mapping
    (``node.options["stride_w"]``, ``.get()``); ``type_name`` is the schema's table name
    (``Conv2DOptions``, ``NoOptions`` for an op without options). Every field of the table is
    present under its snake_case name, with the schema's default where the file omits it.
    Integers, floats and booleans are Python scalars and vectors are tuples. Every enum is the
    name TFLite gives it (``padding == "SAME"``, ``fused_activation_function == "RELU6"``,
    ``weights_format == "DEFAULT"``, TensorType fields such as ``out_type == "INT32"``); a
    number the schema has no name for (a newer converter's) stays a number. Each op's table
    and fields are listed in docs/node-options.md. Immutable.
    """

    __slots__ = ("_fields", "type_name")

    def __init__(self, type_name: str, fields: Mapping[str, Any]) -> None:
        object.__setattr__(self, "type_name", type_name)
        object.__setattr__(self, "_fields", dict(fields))

    def __getattr__(self, name: str) -> Any:
        try:
            return self._fields[name]
        except KeyError:
            raise AttributeError(
                f"{self.type_name} has no field {name!r}; fields are {sorted(self._fields)}"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("OpOptions is immutable")

    def __getitem__(self, key: str) -> Any:
        return self._fields[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def __hash__(self) -> int:
        return hash((self.type_name, tuple(sorted(self._fields))))

    def get(self, key: str, default: Any = None) -> Any:
        return self._fields.get(key, default)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._fields.items())
        return f"{self.type_name}({inner})"


EMPTY_OPTIONS = OpOptions("NoOptions", {})


@dataclass(frozen=True, eq=False)
class Node:
    """One operator of a subgraph. ``inputs`` may hold -1 for an omitted optional input."""

    index: int
    op: str
    version: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: OpOptions = EMPTY_OPTIONS
    intermediates: tuple[int, ...] = ()
    custom_code: str | None = None
    custom_options: bytes = b""
    builtin_code: int = -1
    # An options table of another op's type that the file gave this node and that was
    # ignored, as LiteRT ignores it ("" when none): see Model.load_report().
    ignored_options: str = ""

    @property
    def is_custom(self) -> bool:
        return self.custom_code is not None

    @property
    def op_name(self) -> str:
        """What reports group the node under: its builtin op, or a custom op's custom code."""
        return self.custom_code if self.custom_code is not None else self.op

    def describe(self) -> str:
        """``CONV_2D v3 (node 12)``: how errors and reports name a node."""
        name = f"custom op {self.custom_code!r}" if self.is_custom else f"{self.op} v{self.version}"
        return f"{name} (node {self.index})"


@dataclass(frozen=True, eq=False)
class Subgraph:
    index: int
    name: str
    tensors: tuple[Tensor, ...]
    nodes: tuple[Node, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    # The Model holding this subgraph, set by Model itself and held weakly, since the model
    # holds its subgraphs. A field rather than an attribute so that dataclasses.replace (the
    # folded and shape-corrected copies delegates get) carries it over.
    _model: weakref.ref[Model] | None = field(default=None, repr=False, compare=False)

    @property
    def model(self) -> Model | None:
        """The model this subgraph belongs to (where the subgraphs its WHILE, IF and CALL_ONCE
        nodes call are), or None for a subgraph built by hand or whose model is gone."""
        return self._model() if self._model is not None else None

    def producers(self) -> dict[int, int]:
        """Map tensor index -> index of the node that writes it."""
        return {t: node.index for node in self.nodes for t in node.outputs if t >= 0}

    def consumers(self) -> dict[int, list[int]]:
        """Map tensor index -> indices of the nodes that read it, in execution order."""
        users: dict[int, list[int]] = {}
        for node in self.nodes:
            for t in node.inputs:
                if t >= 0:
                    users.setdefault(t, []).append(node.index)
        return users


@dataclass(frozen=True)
class SignatureDef:
    key: str
    subgraph_index: int
    inputs: Mapping[str, int]
    outputs: Mapping[str, int]


@dataclass(frozen=True, eq=False)
class Model:
    """A loaded .tflite model. Build one with :func:`offload.load_model`."""

    version: int
    description: str
    subgraphs: tuple[Subgraph, ...]
    signatures: tuple[SignatureDef, ...]
    metadata: Mapping[str, bytes]
    model_type: ModelType
    model_type_reason: str
    source: str
    content: Any = field(repr=False, default=None)

    def __post_init__(self) -> None:
        ref = weakref.ref(self)
        for sg in self.subgraphs:
            object.__setattr__(sg, "_model", ref)

    @property
    def main(self) -> Subgraph:
        return self.subgraphs[0]

    def load_report(self) -> dict[str, Any]:
        """What loading set aside without failing: ``ignored_options`` lists each node whose
        options table was of another op's type (LiteRT ignores such a table, and so does
        offload: the node runs with its own options' defaults)."""
        return {
            "ignored_options": [
                {
                    "subgraph": sg.index,
                    "node": node.index,
                    "op": node.op,
                    "reason": node.ignored_options,
                }
                for sg in self.subgraphs
                for node in sg.nodes
                if node.ignored_options
            ]
        }

    def op_histogram(self) -> dict[str, int]:
        """Count of nodes per op name (custom ops by their custom code) over every subgraph."""
        counts: dict[str, int] = {}
        for sg in self.subgraphs:
            for node in sg.nodes:
                key = node.op_name
                counts[key] = counts.get(key, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

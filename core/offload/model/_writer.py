"""Write a built model as .tflite flatbuffer bytes.

The flatbuffers builder writes back to front and forbids nesting, so every vector, string and
child table is created before the table that refers to it. Options tables are written through
the generated ``<Options>Add<Field>`` functions of the ``tflite`` package, field by field as
:func:`offload._schema.option_fields` lists them, into whichever of the schema's two options
unions holds the table. The builder and :func:`offload.export_partition` both write through
here: one .tflite writer in the project.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import flatbuffers
import numpy as np
import tflite

from offload._graph import Quantization, Sparsity
from offload._schema import OPTION2_TYPES, OPTION_TYPES, option_field_map
from offload.errors import ModelBuildError

if TYPE_CHECKING:
    from offload.model.builder import ModelBuilder, SubgraphBuilder

__all__ = ["OperatorSpec", "TensorSpec", "write_model"]

_FILE_IDENTIFIER = b"TFL3"
_BUFFER_ALIGNMENT = 16
_PLACEHOLDER_FOR_GREATER_OP_CODES = 127


@dataclass
class TensorSpec:
    """One tensor as the builder collected it; ``buffer`` 0 is the empty (runtime) buffer.

    ``sparsity``: a sparse constant's storage layout (its buffer holds the stored values).
    """

    name: str
    shape: tuple[int, ...]
    type_id: int
    buffer: int
    quantization: Quantization | None
    shape_signature: tuple[int, ...] | None
    is_variable: bool
    sparsity: Sparsity | None = None


@dataclass
class OperatorSpec:
    """One operator: its opcode index, tensors and options (enums already numbers).

    ``options_type`` names a table of either options union; ``options`` holds its fields by
    snake_case name (vectors as arrays, strings as str).
    """

    opcode: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options_type: str | None
    options: dict[str, Any]
    custom_options: bytes
    intermediates: tuple[int, ...]


def _int_vector(b: flatbuffers.Builder, values: Sequence[int], dtype: Any = np.int32) -> int:
    return b.CreateNumpyVector(np.asarray(values, dtype=dtype).ravel())


def _aligned_bytes(b: flatbuffers.Builder, data: bytes) -> int:
    b.StartVector(1, len(data), _BUFFER_ALIGNMENT)
    b.head = b.head - len(data)
    b.Bytes[b.head : b.head + len(data)] = data
    b.vectorNumElems = len(data)
    return b.EndVector()


def _write_options(b: flatbuffers.Builder, type_name: str, options: Mapping[str, Any]) -> int:
    fields = option_field_map(type_name)
    present = {key: value for key, value in options.items() if value is not None}
    # Vectors and strings are written before the table that points at them.
    children = {
        key: (
            b.CreateString(value)
            if fields[key].kind == "string"
            else b.CreateNumpyVector(np.asarray(value, fields[key].dtype).ravel())
        )
        for key, value in present.items()
        if fields[key].kind in ("vector", "string")
    }
    getattr(tflite, f"{type_name}Start")(b)
    for key, value in present.items():
        adder = getattr(tflite, f"{type_name}Add{fields[key].getter}")
        adder(b, children.get(key, value))
    return getattr(tflite, f"{type_name}End")(b)


def _index_vector(b: flatbuffers.Builder, values: np.ndarray) -> tuple[int, int]:
    """A SparseIndexVector (union type, table) in the narrowest type that holds ``values``,
    the choice TFLite's sparsifier makes."""
    low, high = (int(values.min()), int(values.max())) if values.size else (0, 0)
    choices = ((3, np.uint8, "Uint8Vector"), (2, np.uint16, "Uint16Vector"))
    type_id, dtype, name = next(
        (c for c in choices if low >= 0 and high <= np.iinfo(c[1]).max),
        (1, np.int32, "Int32Vector"),
    )
    vec = b.CreateNumpyVector(np.asarray(values, dtype).ravel())
    getattr(tflite, f"{name}Start")(b)
    getattr(tflite, f"{name}AddValues")(b, vec)
    return type_id, getattr(tflite, f"{name}End")(b)


def _write_sparsity(b: flatbuffers.Builder, s: Sparsity) -> int:
    dims = []
    for d in s.dim_metadata:
        segments = _index_vector(b, d.array_segments) if d.array_segments is not None else None
        indices = _index_vector(b, d.array_indices) if d.array_indices is not None else None
        tflite.DimensionMetadataStart(b)
        tflite.DimensionMetadataAddFormat(b, 1 if d.format == "SPARSE_CSR" else 0)
        tflite.DimensionMetadataAddDenseSize(b, d.dense_size)
        if segments is not None:
            tflite.DimensionMetadataAddArraySegmentsType(b, segments[0])
            tflite.DimensionMetadataAddArraySegments(b, segments[1])
        if indices is not None:
            tflite.DimensionMetadataAddArrayIndicesType(b, indices[0])
            tflite.DimensionMetadataAddArrayIndices(b, indices[1])
        dims.append(tflite.DimensionMetadataEnd(b))
    dim_metadata = _vector_of_tables(b, dims)
    traversal = _int_vector(b, s.traversal_order)
    block_map = _int_vector(b, s.block_map) if s.block_map else None
    tflite.SparsityParametersStart(b)
    tflite.SparsityParametersAddTraversalOrder(b, traversal)
    if block_map is not None:
        tflite.SparsityParametersAddBlockMap(b, block_map)
    tflite.SparsityParametersAddDimMetadata(b, dim_metadata)
    return tflite.SparsityParametersEnd(b)


def _write_quantization(b: flatbuffers.Builder, q: Quantization) -> int:
    scale = b.CreateNumpyVector(np.asarray(q.scale, np.float32).ravel())
    zero_point = b.CreateNumpyVector(np.asarray(q.zero_point, np.int64).ravel())
    tflite.QuantizationParametersStart(b)
    tflite.QuantizationParametersAddScale(b, scale)
    tflite.QuantizationParametersAddZeroPoint(b, zero_point)
    tflite.QuantizationParametersAddQuantizedDimension(b, q.quantized_dimension)
    return tflite.QuantizationParametersEnd(b)


def _write_tensor(b: flatbuffers.Builder, t: TensorSpec) -> int:
    name = b.CreateString(t.name)
    shape = _int_vector(b, t.shape)
    signature = _int_vector(b, t.shape_signature) if t.shape_signature is not None else None
    quant = _write_quantization(b, t.quantization) if t.quantization is not None else None
    sparsity = _write_sparsity(b, t.sparsity) if t.sparsity is not None else None
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
    if sparsity is not None:
        tflite.TensorAddSparsity(b, sparsity)
    return tflite.TensorEnd(b)


def _write_operator(b: flatbuffers.Builder, op: OperatorSpec) -> int:
    inputs = _int_vector(b, op.inputs)
    outputs = _int_vector(b, op.outputs)
    intermediates = _int_vector(b, op.intermediates) if op.intermediates else None
    options_type = op.options_type
    options = _write_options(b, options_type, op.options) if options_type else None
    custom = (
        b.CreateNumpyVector(np.frombuffer(op.custom_options, np.uint8))
        if op.custom_options
        else None
    )
    tflite.OperatorStart(b)
    tflite.OperatorAddOpcodeIndex(b, op.opcode)
    tflite.OperatorAddInputs(b, inputs)
    tflite.OperatorAddOutputs(b, outputs)
    if options is not None and options_type in OPTION2_TYPES:
        tflite.OperatorAddBuiltinOptions2Type(b, OPTION2_TYPES[options_type])
        tflite.OperatorAddBuiltinOptions2(b, options)
    elif options is not None and options_type:
        tflite.OperatorAddBuiltinOptionsType(b, OPTION_TYPES[options_type])
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


def write_model(mb: ModelBuilder) -> bytes:
    """The model ``mb`` describes, as .tflite bytes."""
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

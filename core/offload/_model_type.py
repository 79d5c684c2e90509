"""Decide which row of the delegate capability table a model belongs to.

The converter records what it did in the ``CONVERSION_METADATA`` metadata entry; where a model
has it, that decides. Older models (and hand-built ones) are classified from the graph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from flatbuffers.table import Table

if TYPE_CHECKING:
    from offload._graph import ModelType, Subgraph

# ModelOptimizationMode values from TensorFlow Lite's conversion_metadata.fbs.
PTQ_FLOAT16 = 1001
PTQ_DYNAMIC_RANGE = 1002
PTQ_FULL_INTEGER = 1003
PTQ_INT16 = 1004
QUANTIZATION_AWARE_TRAINING = 2000

_QUANTIZED_ACTIVATIONS = {np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16)}
_FLOAT = {np.dtype(np.float32)}


def read_optimization_modes(blob: bytes) -> tuple[int, ...]:
    """The ``model_optimization_modes`` of a CONVERSION_METADATA flatbuffer.

    The ``tflite`` package does not carry this small schema (ConversionMetadata.options at
    field 1, ConversionOptions.model_optimization_modes at field 0, a vector of 32-bit enum
    values), so the two fields are read with the flatbuffers runtime directly.
    """
    buf = bytearray(blob)
    root = Table(buf, int.from_bytes(buf[0:4], "little"))
    options_field = root.Offset(6)
    if not options_field:
        return ()
    options = Table(buf, root.Indirect(root.Pos + options_field))
    modes_field = options.Offset(4)
    if not modes_field:
        return ()
    start = options.Vector(modes_field)
    count = options.VectorLen(modes_field)
    return tuple(int(v) for v in np.frombuffer(bytes(buf[start : start + 4 * count]), "<i4"))


def classify_model_type(
    subgraphs: Sequence[Subgraph], metadata: Mapping[str, bytes]
) -> tuple[ModelType, str]:
    """Return (model_type, how it was decided)."""
    blob = metadata.get("CONVERSION_METADATA")
    if blob:
        try:
            modes = read_optimization_modes(blob)
        except Exception:  # a damaged metadata entry must not stop the model from loading
            modes = ()
        if QUANTIZATION_AWARE_TRAINING in modes:
            return "qat", "CONVERSION_METADATA lists QUANTIZATION_AWARE_TRAINING"
        if PTQ_FULL_INTEGER in modes or PTQ_INT16 in modes:
            return "int8", "CONVERSION_METADATA lists PTQ_FULL_INTEGER"
        if PTQ_DYNAMIC_RANGE in modes:
            return "dynamic_range", "CONVERSION_METADATA lists PTQ_DYNAMIC_RANGE"
        if PTQ_FLOAT16 in modes:
            return "float16", "CONVERSION_METADATA lists PTQ_FLOAT16"
        if modes == () and _structure(subgraphs)[0] == "float32":
            return "float32", "CONVERSION_METADATA lists no quantization mode"
    model_type, why = _structure(subgraphs)
    return model_type, f"graph structure: {why}"


def _structure(subgraphs: Sequence[Subgraph]) -> tuple[ModelType, str]:
    fp16_dequantize = False
    int8_weights_into_float = False
    for sg in subgraphs:
        tensors = sg.tensors
        for node in sg.nodes:
            runtime_ins = [tensors[i] for i in node.inputs if i >= 0 and not tensors[i].is_constant]
            runtime_outs = [tensors[i] for i in node.outputs if i >= 0]
            for t in (*runtime_ins, *runtime_outs):
                if t.dtype in _QUANTIZED_ACTIVATIONS and t.quantization is not None:
                    return "int8", (
                        f"quantized {t.type_name} activation {t.name!r} at {node.describe()}"
                    )
            const_ins = [tensors[i] for i in node.inputs if i >= 0 and tensors[i].is_constant]
            if node.op in ("DEQUANTIZE", "DENSIFY") and any(
                t.dtype == np.float16 for t in const_ins
            ):
                fp16_dequantize = True
            elif (
                node.op != "DEQUANTIZE"
                and any(t.dtype == np.int8 and t.quantization is not None for t in const_ins)
                and any(t.dtype in _FLOAT for t in runtime_outs)
            ):
                int8_weights_into_float = True
    if int8_weights_into_float:
        return "dynamic_range", "int8 constant weights feed float ops"
    if fp16_dequantize:
        return "float16", "float16 constant weights behind DEQUANTIZE"
    return "float32", "float activations and weights throughout"

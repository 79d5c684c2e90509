"""Constants in the float view: which tensors gpu_opencl reads once at init, and their values.

The core folds DEQUANTIZE and DENSIFY of constants before planning (float16 and sparse
weights), so what reaches a partition is already a plain dense constant: a tensor is *folded*
here exactly when it is a constant. Its float view (``scale * (q - zero_point)`` for
quantized integers, float32 otherwise) is uploaded once, in the storage precision.
"""

from __future__ import annotations

import numpy as np

from offload import Subgraph
from offload.quant import dequantize

__all__ = ["foldable", "folded_value"]


def foldable(subgraph: Subgraph, t: int) -> bool:
    """Is tensor ``t`` a dense constant (model constant, or one the core folded)?

    Variables are state, not weights; a sparse constant that no DENSIFY expanded (one read
    straight by an op) stays in storage form, which no kernel here reads.
    """
    return subgraph.tensors[t].is_dense_constant


def folded_value(subgraph: Subgraph, t: int) -> np.ndarray:
    """The float32 view of a :func:`foldable` tensor, shaped as the tensor."""
    tensor = subgraph.tensors[t]
    value = tensor.constant_value()
    # A folded DENSIFY of integer weights stays typed and quantized: dequantize it like any
    # quantized constant. Without quantization parameters the values only change dtype.
    if tensor.quantization is not None and np.issubdtype(tensor.dtype, np.integer):
        return dequantize(value, tensor.quantization)
    return np.asarray(value, dtype=np.float32)

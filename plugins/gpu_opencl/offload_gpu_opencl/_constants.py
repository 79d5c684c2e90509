"""What gpu_opencl takes from offload's private modules, and constant folding.

Every import of a private core module is here (quantization, convolution geometry, the BASIC
LSTM's shape check), next to the folding helpers that copy core rules (the float view of a
constant, DENSIFY of a sparse constant): when the core makes them public, this one module
changes.

A tensor is *folded* when it is a constant or computed from constants only, by DEQUANTIZE
(float16 weights) or DENSIFY (sparse weights): its float values are made once at init.
"""

from __future__ import annotations

import numpy as np

from offload import Subgraph, Tensor
from offload.ops._conv import geometry, window_options
from offload.ops._lstm_basic import check_shapes
from offload.ops._quant import dequantize, quantize

__all__ = [
    "check_shapes",
    "densify",
    "densify_reason",
    "dequantize",
    "foldable",
    "folded_value",
    "geometry",
    "quantize",
    "window_options",
]


def _const_float(tensor: Tensor) -> np.ndarray:
    value = tensor.constant_value()
    if tensor.dtype == np.float32:
        return value
    if tensor.dtype in (np.float16, np.float64):
        return value.astype(np.float32)
    if tensor.quantization is not None and np.issubdtype(tensor.dtype, np.integer):
        return dequantize(value, tensor.quantization)
    return value.astype(np.float32)


def foldable(subgraph: Subgraph, t: int, producers: dict[int, int] | None = None) -> bool:
    """Is tensor ``t`` a constant, or computed only from constants by DEQUANTIZE / DENSIFY?"""
    tensor = subgraph.tensors[t]
    if tensor.is_constant:
        return not tensor.is_variable and tensor.sparsity is None
    producers = subgraph.producers() if producers is None else producers
    n = producers.get(t)
    if n is None:
        return False
    node = subgraph.nodes[n]
    if node.op == "DEQUANTIZE":
        return node.inputs[0] >= 0 and foldable(subgraph, node.inputs[0], producers)
    if node.op == "DENSIFY":
        src = subgraph.tensors[node.inputs[0]]
        return src.is_constant and densify_reason(src) is None
    return False


def folded_value(subgraph: Subgraph, t: int, producers: dict[int, int] | None = None) -> np.ndarray:
    """The float view of a foldable tensor, shaped as the tensor."""
    tensor = subgraph.tensors[t]
    if tensor.is_constant:
        return _const_float(tensor)
    producers = subgraph.producers() if producers is None else producers
    node = subgraph.nodes[producers[t]]
    if node.op == "DEQUANTIZE":
        return folded_value(subgraph, node.inputs[0], producers).reshape(tensor.shape)
    src = subgraph.tensors[node.inputs[0]]
    dense = densify(src)
    if src.quantization is not None and np.issubdtype(dense.dtype, np.integer):
        return dequantize(dense, src.quantization)
    return dense.astype(np.float32)


def densify_reason(tensor: Tensor) -> str | None:
    """None if :func:`densify` can expand this sparse constant, else why not."""
    sp = tensor.sparsity
    if sp is None:
        return "input is not a sparse constant"
    if sp.block_map:
        return "block-sparse constants are not supported"
    if tuple(sp.traversal_order) != tuple(range(len(tensor.shape))):
        return "only the identity traversal order is supported"
    return None


def densify(tensor: Tensor) -> np.ndarray:
    """Expand a TACO-format sparse constant (no blocks, identity traversal) to a dense array."""
    sp = tensor.sparsity
    assert sp is not None
    values = np.frombuffer(np.asarray(tensor.data).tobytes(), dtype=tensor.dtype)
    pos = np.zeros(1, np.int64)
    coords = np.zeros((1, 0), np.int64)
    for dm in sp.dim_metadata:
        if dm.format == "DENSE":
            n = int(dm.dense_size)
            coords = np.concatenate(
                [np.repeat(coords, n, axis=0), np.tile(np.arange(n), len(pos))[:, None]], axis=1
            )
            pos = (pos[:, None] * n + np.arange(n)).ravel()
        else:
            seg = np.asarray(dm.array_segments, np.int64)
            idx = np.asarray(dm.array_indices, np.int64)
            starts, counts = seg[pos], seg[pos + 1] - seg[pos]
            owner = np.repeat(np.arange(len(pos)), counts)
            first = np.repeat(np.cumsum(counts) - counts, counts)
            k = starts[owner] + np.arange(int(counts.sum())) - first
            coords = np.concatenate([coords[owner], idx[k][:, None]], axis=1)
            pos = k
    out = np.zeros(tensor.shape, dtype=tensor.dtype)
    out[tuple(coords.T)] = values[pos]
    return out

"""Static bounds on the magnitude of float tensors, known from the graph before any run.

LiteRT's float ADD, SUB, MUL and DIV clamp their result to float32's finite range even with no
fused activation, so an overflow gives +-FLT_MAX rather than inf; that clamp is a pass over
the output. Where every value a tensor can hold is far inside the finite range, the clamp
cannot change anything and the kernel skips it. Quantization-aware graphs are where this
pays: their float ops run on DEQUANTIZE outputs, whose range the quantization parameters fix.

A bound is an upper limit on |value| (``math.inf`` when nothing is known: graph inputs,
variables, ops without a rule). It is propagated forward through the ops whose output range
follows from their inputs' ranges; float rounding adds a relative 2**-24 an op at most, which
the margin of :data:`SAFE_MAGNITUDE` below the float32 maximum absorbs many times over.
"""

from __future__ import annotations

import math
import weakref

import numpy as np

from offload._graph import Node, Subgraph, Tensor

__all__ = ["SAFE_MAGNITUDE", "magnitude_bound"]

# Results bounded by this cannot reach float32's maximum (3.4e38) through float32 rounding.
SAFE_MAGNITUDE = 1e30

# Ops whose output is bounded by their first input's bound.
_SAME_AS_INPUT = frozenset(
    {
        "RESHAPE",
        "SQUEEZE",
        "EXPAND_DIMS",
        "TRANSPOSE",
        "RELU",
        "HARD_SWISH",  # |x * relu6(x + 3) / 6| <= |x|
        "MEAN",
        "AVERAGE_POOL_2D",
        "MAX_POOL_2D",
        "NEG",
        "ABS",
    }
)
# Ops whose output lies in a fixed range whatever the input.
_FIXED = {"RELU6": 6.0, "RELU_N1_TO_1": 1.0, "LOGISTIC": 1.0, "TANH": 1.0}
_ACTIVATION_LIMITS = {"RELU6": 6.0, "RELU_N1_TO_1": 1.0, "TANH": 1.0, "SIGMOID": 1.0}

_cache: weakref.WeakKeyDictionary[Subgraph, list[float]] = weakref.WeakKeyDictionary()


def magnitude_bound(subgraph: Subgraph, tensor_index: int) -> float:
    """An upper bound on |value| of every element tensor ``tensor_index`` of ``subgraph`` can
    hold, or ``math.inf``. Computed for the whole subgraph on first use, in one pass over its
    nodes (they are in execution order)."""
    bounds = _cache.get(subgraph)
    if bounds is None:
        bounds = _cache[subgraph] = _propagate(subgraph)
    return bounds[tensor_index] if 0 <= tensor_index < len(bounds) else math.inf


def _propagate(subgraph: Subgraph) -> list[float]:
    bounds = [_constant_bound(t) for t in subgraph.tensors]
    for node in subgraph.nodes:
        if len(node.outputs) != 1 or not 0 <= node.outputs[0] < len(bounds):
            continue
        out = node.outputs[0]
        if subgraph.tensors[out].is_variable:
            continue
        inputs = [bounds[i] if 0 <= i < len(bounds) else math.inf for i in node.inputs]
        bound = _node_bound(node, subgraph.tensors, inputs)
        # NaN (from inf * 0 in a crafted model) means unknown.
        bounds[out] = bound if bound == bound else math.inf
    return bounds


def _node_bound(node: Node, tensors: tuple[Tensor, ...], inputs: list[float]) -> float:
    op = node.op
    if op == "DEQUANTIZE" and node.inputs and 0 <= node.inputs[0] < len(tensors):
        bound = _dequantized_bound(tensors[node.inputs[0]])
    elif op in _FIXED:
        return _FIXED[op]
    elif op in _SAME_AS_INPUT and inputs:
        bound = inputs[0]
    elif op == "CONCATENATION" and inputs:
        bound = max(inputs)
    elif op in ("ADD", "SUB") and len(inputs) == 2:
        bound = inputs[0] + inputs[1]
    elif op == "MUL" and len(inputs) == 2:
        bound = inputs[0] * inputs[1]
    else:
        return math.inf
    activation = node.options.get("fused_activation_function", "NONE") or "NONE"
    return min(bound, _ACTIVATION_LIMITS.get(activation, math.inf))


def _constant_bound(tensor: Tensor) -> float:
    """max |value| of a float constant; inf for anything else or a value with NaN."""
    if not tensor.is_constant or tensor.sparsity is not None or tensor.dtype.kind != "f":
        return math.inf
    value = tensor.constant_value()
    if value.size == 0:
        return 0.0
    with np.errstate(invalid="ignore"):
        bound = float(np.max(np.abs(value)))
    return bound if bound == bound else math.inf


def _dequantized_bound(source: Tensor) -> float:
    """The largest |scale * (q - zero_point)| over the integer type's range and every channel;
    a float16 source is bounded by float16's maximum."""
    if source.dtype == np.float16:
        return float(np.finfo(np.float16).max)
    q = source.quantization
    if source.dtype.kind not in "iu" or q is None or q.scale.size == 0:
        return math.inf
    info = np.iinfo(source.dtype)
    zero_points = np.asarray(q.zero_point, np.float64) if q.zero_point.size else np.zeros(1)
    with np.errstate(invalid="ignore", over="ignore"):
        reach = np.maximum(np.abs(info.min - zero_points), np.abs(info.max - zero_points))
        bound = float(np.max(np.abs(np.asarray(q.scale, np.float64)) * reach.max()))
    return bound if bound == bound else math.inf

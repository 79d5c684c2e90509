"""The work a node does: floating-point operations and bytes moved, for rooflines and GFLOP/s.

One rule for the whole project: the roofline of ``offload benchmark --roofline``, the
``"work"`` section of ``delegation_report()`` and a delegate's device profile (gpu_opencl's
GFLOP/s per kernel family) all count with :func:`node_work`.

The conventions, those of the usual GFLOP/s figures:

- a multiply-add counts 2 FLOPs; a convolution's or matmul's bias and fused activation are
  not counted (they are a vanishing share of its work);
- an elementwise op counts 1 FLOP per output element, whatever the function (a
  transcendental counts 1 too); ADD_N counts one per added input beyond the first;
- a pool counts 1 per window element per output (2 for L2_POOL_2D: square and add); a
  reduction 1 per input element; SOFTMAX and LOG_SOFTMAX 5 per element (max, subtract,
  exponential, sum, divide); a bilinear resize 8 per output (four neighbours weighted); RFFT2D
  2.5 N log2 N per transform of N points (the usual figure for a real FFT);
- data movement (reshape, concatenation, transpose, pad, slice, gather, nearest-neighbour
  resize, cast, ...) and any op not listed count 0 FLOPs;
- bytes are the node's distinct input and output tensors at their dtype's size, constants
  (weights) included, so a plan's bytes count an intermediate once as written and once per
  reader: what a runtime that keeps nothing in cache moves.

Shapes are the current ones where given (after ``resize_tensor_input``), else the declared
ones. A node whose tensors do not fit its op's layout (a malformed model) counts 0 FLOPs rather
than raising: the figures describe a plan; they never stop one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from offload._graph import Node, Subgraph

__all__ = ["NodeWork", "node_work"]

# One FLOP per output element.
_ELEMENTWISE = frozenset(
    """ABS ADD CEIL COS DEQUANTIZE DIV ELU EQUAL EXP FLOOR FLOOR_DIV FLOOR_MOD GELU GREATER
    GREATER_EQUAL HARD_SWISH LEAKY_RELU LESS LESS_EQUAL LOG LOGICAL_AND LOGICAL_NOT LOGICAL_OR
    LOGISTIC MAXIMUM MINIMUM MUL NEG NOT_EQUAL POW PRELU QUANTIZE RELU RELU6 RELU_0_TO_1
    RELU_N1_TO_1 ROUND RSQRT SELECT SELECT_V2 SIN SQRT SQUARE SQUARED_DIFFERENCE SUB TANH
    COMPLEX_ABS""".split()
)
# One FLOP per input element.
_REDUCTIONS = frozenset(
    """MEAN SUM REDUCE_MAX REDUCE_MIN REDUCE_PROD REDUCE_ANY REDUCE_ALL ARG_MAX ARG_MIN CUMSUM
    TOPK_V2""".split()
)
_POOLS = {"AVERAGE_POOL_2D": 1, "MAX_POOL_2D": 1, "L2_POOL_2D": 2}
_PER_ELEMENT = {"SOFTMAX": 5, "LOG_SOFTMAX": 5, "L2_NORMALIZATION": 3, "RESIZE_BILINEAR": 8}
# Recurrent ops: every 2-D weight is a matmul per batch row and time step.
_RECURRENT = frozenset("LSTM UNIDIRECTIONAL_SEQUENCE_LSTM RNN UNIDIRECTIONAL_SEQUENCE_RNN".split())


@dataclass(frozen=True)
class NodeWork:
    """A node's floating-point operations and the bytes of its input and output tensors."""

    flops: int
    bytes: int

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved (0.0 for a node that moves nothing)."""
        return self.flops / self.bytes if self.bytes else 0.0


def elements(shape: Sequence[int]) -> int:
    """Values in a tensor of ``shape`` (1 for a scalar; a negative dimension counts 0)."""
    return math.prod(max(int(d), 0) for d in shape)


def node_work(
    node: Node,
    subgraph: Subgraph,
    shapes: Mapping[int, Sequence[int]] | Sequence[Sequence[int]] | None = None,
) -> NodeWork:
    """FLOPs and bytes moved of one invoke of ``node`` (the module's doc gives the rule).

    ``shapes`` maps a tensor index to its current shape (an interpreter's shapes after a
    resize); tensors it does not cover, and constants, keep the subgraph's shapes.
    """
    tensors = subgraph.tensors

    def shape(t: int) -> Sequence[int]:
        if shapes is not None and not tensors[t].is_constant:
            try:
                return shapes[t]
            except (IndexError, KeyError, TypeError):
                pass
        return tensors[t].shape

    moved = 0
    for t in dict.fromkeys((*node.inputs, *node.outputs)):
        if 0 <= t < len(tensors):
            count = elements(shape(t))
            tensor = tensors[t]
            if tensor.type_name == "INT4":  # two values a byte
                moved += -(-count // 2)
            else:
                moved += count * tensor.dtype.itemsize
    try:
        flops = _flops(node, shape, subgraph)
    except (IndexError, KeyError, TypeError, ValueError, AttributeError):
        flops = 0
    return NodeWork(max(int(flops), 0), moved)


def _flops(node: Node, size_of: Callable[[int], Sequence[int]], subgraph: Subgraph) -> int:
    def size(t: int) -> int:
        return elements(size_of(t))

    op, ins = node.op, node.inputs
    out = size(node.outputs[0]) if node.outputs else 0
    if op == "CONV_2D":  # filter [O, KH, KW, I per group]: KH*KW*I products per output
        _, kh, kw, ci = size_of(ins[1])
        return 2 * out * kh * kw * ci
    if op == "CONV_3D":  # filter [KD, KH, KW, I, O]: KD*KH*KW*I products per output
        kd, kh, kw, ci, _ = size_of(ins[1])
        return 2 * out * kd * kh * kw * ci
    if op == "DEPTHWISE_CONV_2D":  # filter [1, KH, KW, C*M]: KH*KW products per output
        _, kh, kw, _ = size_of(ins[1])
        return 2 * out * kh * kw
    if op == "FULLY_CONNECTED":  # weights [O, K]: K products per output
        return 2 * out * size_of(ins[1])[1]
    if op == "TRANSPOSE_CONV":  # every input value scatters into KH*KW*O outputs
        co, kh, kw, _ = size_of(ins[1])
        return 2 * size(ins[2]) * kh * kw * co
    if op == "BATCH_MATMUL":  # lhs [..., M, K] (adj_x: [..., K, M]): K products per output
        lhs = size_of(ins[0])
        k = lhs[-2] if node.options.get("adj_x") else lhs[-1]
        return 2 * out * k
    if op in _RECURRENT:
        return _recurrent_flops(node, size_of, subgraph)
    if op in _ELEMENTWISE:
        return out
    if op == "ADD_N":
        return out * max(len(ins) - 1, 0)
    if op in _REDUCTIONS:
        return size(ins[0])
    if op in _POOLS:
        opts = node.options
        return _POOLS[op] * out * int(opts.filter_height) * int(opts.filter_width)
    if op in _PER_ELEMENT:
        return _PER_ELEMENT[op] * out
    if op == "RFFT2D":  # input [..., H, W], fft_length [FH, FW]: 2.5 N log2 N, N = FH*FW
        fft = subgraph.tensors[ins[1]]
        points = math.prod(int(v) for v in fft.constant_value()) if fft.is_constant else 0
        batch = elements(size_of(ins[0])[:-2])
        return int(2.5 * batch * points * math.log2(points)) if points > 1 else 0
    if op == "LOCAL_RESPONSE_NORMALIZATION":  # a window of squares summed, then a power
        return out * (2 * (2 * int(node.options.radius) + 1) + 3)
    return 0


def _recurrent_flops(
    node: Node, size_of: Callable[[int], Sequence[int]], subgraph: Subgraph
) -> int:
    """The matmuls of an LSTM or RNN: each 2-D weight (input, recurrent, projection) times
    every batch row and time step; the gates' elementwise work is not counted."""
    tensors = subgraph.tensors
    x = size_of(node.inputs[0])
    rows = elements(x) // max(int(x[-1]), 1)
    weights = 0
    for t in node.inputs[1:]:
        if t < 0 or tensors[t].is_variable:  # state, not a weight
            continue
        dims = size_of(t)
        if len(dims) == 2:
            weights += elements(dims)
    return 2 * rows * weights

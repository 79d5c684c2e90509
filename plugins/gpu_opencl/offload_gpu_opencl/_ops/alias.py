"""RESHAPE, and DEQUANTIZE in the float view: the output is the input's buffer, no launch.

A RESHAPE of a constant copies it into the output's buffer (unary8's COPY). DEQUANTIZE is
offered for runtime tensors only (an int8 or float16 activation, already real values in the
float view): the core folds the DEQUANTIZE of constant weights before planning, and the one
of a constant that it leaves is state, refused here (:func:`dequantize_check`)."""

from __future__ import annotations

from offload import Node, Subgraph
from offload_gpu_opencl._constants import foldable
from offload_gpu_opencl._ir import Lowering, elements
from offload_gpu_opencl._ops._spec import OpSpec
from offload_gpu_opencl._ops.unary import COPY
from offload_gpu_opencl._shapes import need, rule_reason

__all__ = ["SPECS"]


def reshape_limits(node: Node, sg: Subgraph) -> None:
    """The lowering aliases the input's storage (the core's rule keeps the element count);
    a shape tensor it reads must be a dense constant, not a variable's first value."""
    if len(node.inputs) > 1 and node.inputs[1] >= 0:
        shape_t = sg.tensors[node.inputs[1]]
        need(
            not shape_t.is_constant or foldable(sg, shape_t.index),
            "shape (input 1) must be a dense constant",
        )


def dequantize_check(node: Node, subgraph: Subgraph) -> str | None:
    """Refuse a DEQUANTIZE of a constant: the core folds those of weights, so one still offered
    makes state (an LSTM state dequantized from float16 zeros, which the LSTM updates in place).
    The core computes it once and again at reset_all_variables; a partition would compute it
    afresh every invoke, or hand back the same array for the LSTM to write into and never reset.
    """
    reason = rule_reason(node, subgraph)
    if reason is not None:
        return reason
    x = node.inputs[0]
    if foldable(subgraph, x):
        return (
            f"expected a runtime input, found constant tensor {x}: its output is state that the "
            "core dequantizes once and again at reset_all_variables"
        )
    return None


def lower(lw: Lowering, node: Node) -> None:
    x, t = node.inputs[0], node.outputs[0]
    if lw.is_folded(x):  # RESHAPE of a constant (DEQUANTIZE refuses them)
        total = elements(lw.tensor(t).shape)
        lw.launch(node, "unary8", (-(-total // 8),), lw.ref(x), lw.out(node), total, COPY)
        return
    lw.alias[t] = lw.root(x)


SPECS = (
    OpSpec(op="RESHAPE", lower=lower, limits=reshape_limits),
    OpSpec(
        op="DEQUANTIZE",
        lower=lower,
        versions=(1, 3),
        constraints=("a runtime input (the core folds DEQUANTIZE of constants)",),
        check=dequantize_check,
    ),
)

"""RESHAPE, and DEQUANTIZE in the float view: the output is the input's buffer, no launch.

A RESHAPE of a constant copies it into the output's buffer (unary8's COPY). DEQUANTIZE is
offered for runtime tensors only (an int8 or float16 activation, already real values in the
float view): the core folds the DEQUANTIZE of constant weights before planning, and the one
of a constant that it leaves is state, refused here (:func:`dequantize_check`)."""

from __future__ import annotations

import numpy as np

from offload import Node, Subgraph
from offload_gpu_opencl._constants import foldable
from offload_gpu_opencl._ir import Lowering, Shape, elements
from offload_gpu_opencl._ops._spec import OpSpec
from offload_gpu_opencl._ops.unary import COPY
from offload_gpu_opencl._shapes import (
    constant_ints,
    need,
    optional,
    required,
    rule_reason,
    same_shape,
)

__all__ = ["SPECS"]


def reshape_shapes(node: Node, sg: Subgraph) -> list[Shape]:
    """As the CPU reference: a rank-1 int32 shape tensor wins over new_shape; with neither,
    the declared shape (TFLite's legacy rule). The lowering aliases the input's storage, so
    the element counts must agree whatever the shape."""
    x = required(node, sg, 0, "input")
    size = elements(x.shape)
    shape_t = optional(node, sg, 1)
    option = [int(d) for d in (node.options.get("new_shape", ()) or ())]
    has_option = bool(option)
    if shape_t is not None and (
        (len(shape_t.shape) == 1 and shape_t.dtype == np.int32) or not has_option
    ):
        target = constant_ints(sg, shape_t, "shape (input 1)")
    elif has_option:
        target = [] if option == [0] else option  # the converter's [0] means a scalar
    else:
        target = [int(d) for d in sg.tensors[node.outputs[0]].shape]
    unknown = [i for i, d in enumerate(target) if d == -1]
    need(
        len(unknown) <= 1 and all(d >= 1 or d == -1 for d in target),
        f"new shape {target} must have positive dimensions and at most one -1",
    )
    known = elements(d for d in target if d != -1)
    if unknown:
        need(size % known == 0, f"{size} values do not fill new shape {target}")
        target[unknown[0]] = size // known
    need(
        elements(target) == size,
        f"new shape {target} holds {elements(target)} values, the input {size}",
    )
    return [tuple(target)]


def dequantize_check(node: Node, subgraph: Subgraph) -> str | None:
    """Refuse a DEQUANTIZE of a constant: the core folds those of weights, so one still offered
    makes state (an LSTM state dequantized from float16 zeros, which the LSTM updates in place).
    The core computes it once and again at reset_all_variables; a partition would compute it
    afresh every invoke, or hand back the same array for the LSTM to write into and never reset.
    """
    reason = rule_reason(node, subgraph, same_shape)
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
    OpSpec(op="RESHAPE", shapes=reshape_shapes, lower=lower),
    OpSpec(
        op="DEQUANTIZE",
        shapes=same_shape,
        lower=lower,
        versions=(1, 3),
        constraints=("a runtime input (the core folds DEQUANTIZE of constants)",),
        check=dequantize_check,
    ),
)

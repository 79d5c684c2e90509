"""RESHAPE, and DEQUANTIZE in the float view: the output is the input's buffer, no launch.

A DEQUANTIZE of a constant (float16 weights) is folded at init; a RESHAPE of a folded tensor
copies it into the output's buffer (unary8's COPY)."""

from __future__ import annotations

import numpy as np

from offload import Node, Subgraph
from offload_gpu_opencl._ir import Lowering, Shape, elements
from offload_gpu_opencl._ops._spec import OpSpec
from offload_gpu_opencl._ops.unary import COPY
from offload_gpu_opencl._shapes import constant_ints, need, optional, required, same_shape

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


def lower(lw: Lowering, node: Node) -> None:
    x, t = node.inputs[0], node.outputs[0]
    if node.op == "DEQUANTIZE" and lw.is_folded(t):
        return  # folded at init; uploaded or returned from the host when something needs it
    if lw.is_folded(x):
        total = elements(lw.tensor(t).shape)
        lw.launch(node, "unary8", (-(-total // 8),), lw.ref(x), lw.out(node), total, COPY)
        return
    lw.alias[t] = lw.root(x)


SPECS = (
    OpSpec(op="RESHAPE", shapes=reshape_shapes, lower=lower),
    OpSpec(op="DEQUANTIZE", shapes=same_shape, lower=lower, versions=(1, 3)),
)

"""SOFTMAX over the last dimension, one row per item; beta 1 only, as LiteRT's GPU delegate."""

from __future__ import annotations

from offload import Node, Subgraph
from offload_gpu_opencl._ir import Lowering, Shape, elements
from offload_gpu_opencl._ops._spec import OpSpec
from offload_gpu_opencl._shapes import need, required

__all__ = ["SPECS"]


def shapes(node: Node, sg: Subgraph) -> list[Shape]:
    x = required(node, sg, 0, "input")
    need(len(x.shape) >= 1, "input must have at least one dimension (the softmax axis)")
    return [tuple(x.shape)]


def lower(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    shape = lw.tensor(x).shape
    c = int(shape[-1])
    rows = elements(shape) // c
    lw.launch(node, "softmax", (rows,), lw.ref(x), lw.out(node), rows, c)
    lw.finish(node)


SPECS = (
    OpSpec(
        op="SOFTMAX",
        shapes=shapes,
        lower=lower,
        quantized_versions=(1, 2),
        options={"beta": 1.0},
    ),
)

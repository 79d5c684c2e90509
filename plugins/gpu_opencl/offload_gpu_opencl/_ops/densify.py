"""DENSIFY of a sparse constant: folded at init (like LiteRT's DensifyOperationParser), so it
lowers to nothing; the convolutions reading its output get dense weights."""

from __future__ import annotations

from offload import Node, Subgraph
from offload_gpu_opencl._constants import densify_reason
from offload_gpu_opencl._ir import Lowering, Shape
from offload_gpu_opencl._ops._spec import OpSpec
from offload_gpu_opencl._shapes import required, rule_reason

__all__ = ["SPECS"]


def shapes(node: Node, sg: Subgraph) -> list[Shape]:
    return [tuple(required(node, sg, 0, "sparse constant").shape)]


def check(node: Node, subgraph: Subgraph) -> str | None:
    reason = rule_reason(node, subgraph, shapes)
    if reason is not None:
        return reason
    src = subgraph.tensors[node.inputs[0]]
    if not src.is_constant:
        return "input must be a sparse constant"
    return densify_reason(src)


def lower(lw: Lowering, node: Node) -> None:
    """Nothing to launch: the output is folded wherever it is read."""


SPECS = (
    OpSpec(
        op="DENSIFY",
        shapes=shapes,
        lower=lower,
        constraints=("a sparse constant input without block map, identity traversal order",),
        check=check,
    ),
)

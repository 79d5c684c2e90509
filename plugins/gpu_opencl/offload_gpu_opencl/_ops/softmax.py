"""SOFTMAX over the last dimension, beta 1 only, as LiteRT's GPU delegate: one row per item in
the CPU kernel family, one row per group of 64 in the GPU family (cl/softmax.cl)."""

from __future__ import annotations

from offload import Node
from offload_gpu_opencl._ir import Lowering, elements
from offload_gpu_opencl._ops._spec import OpSpec

__all__ = ["SPECS"]

ROW_GROUP = (64,)  # cl/softmax.cl's softmax_rows: its reqd_work_group_size


def lower(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    shape = lw.tensor(x).shape
    c = int(shape[-1])
    rows = elements(shape) // c
    if lw.gpu_family:
        args = (lw.ref(x), lw.out(node), rows, c)
        lw.launch(node, "softmax_rows", (rows * ROW_GROUP[0],), *args, local=ROW_GROUP)
    else:
        lw.launch(node, "softmax", (rows,), lw.ref(x), lw.out(node), rows, c)
    lw.finish(node)


SPECS = (
    OpSpec(
        op="SOFTMAX",
        lower=lower,
        quantized_versions=(1, 2),
        options={"beta": 1.0},
    ),
)

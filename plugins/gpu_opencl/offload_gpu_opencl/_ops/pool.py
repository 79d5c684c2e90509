"""MAX_POOL_2D and AVERAGE_POOL_2D: one pool kernel, 8 channels of one output pixel per item."""

from __future__ import annotations

from offload import Node, Subgraph
from offload_gpu_opencl._ir import Lowering, kernel_act
from offload_gpu_opencl._ops._spec import FUSED_ACTIVATIONS, OpSpec
from offload_gpu_opencl._shapes import window, window_limits

__all__ = ["SPECS"]

_KIND = {"MAX_POOL_2D": 0, "AVERAGE_POOL_2D": 1}  # the pool kernel's `kind`


def limits(node: Node, sg: Subgraph) -> None:
    """A window within 32-bit indices."""
    window_limits(node, sg, (int(node.options.filter_height), int(node.options.filter_width)))


def lower(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    n, h, wd, c = lw.tensor(x).shape
    kh, kw = node.options.filter_height, node.options.filter_width
    (sh, sw), _, (oh, ow), (pt, pl) = window(node, (h, wd), (kh, kw), (0, 0))
    cb = (c + 7) // 8
    lw.launch(
        node,
        "pool",
        (cb, ow, n * oh),
        lw.ref(x),
        lw.out(node),
        h,
        wd,
        c,
        oh,
        ow,
        kh,
        kw,
        sh,
        sw,
        pt,
        pl,
        _KIND[node.op],
        kernel_act(node, lw.subgraph),  # clamped to the finite range: inf gives +-FLT_MAX
        local=lw.shapes.rows_local(cb),
    )
    if node.op == "AVERAGE_POOL_2D":  # a maximum is one of its inputs: already on the grid
        lw.finish(node)


SPECS = tuple(
    OpSpec(
        op=op,
        limits=limits,
        lower=lower,
        quantized_versions=(1, 2),
        fused_activations=FUSED_ACTIVATIONS,
    )
    for op in _KIND
)

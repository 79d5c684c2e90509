"""MAX_POOL_2D, AVERAGE_POOL_2D and MEAN over height and width (a global average pool): one pool
kernel, 8 channels of one output pixel per item; in the GPU family the MEAN has a kernel of its
own (mean_hw), a group of 64 items per 8 channels."""

from __future__ import annotations

from offload import Node, Subgraph
from offload.ops import output_shapes
from offload_gpu_opencl._ir import Lowering, kernel_act
from offload_gpu_opencl._ops._spec import FLOAT_DTYPES, FUSED_ACTIVATIONS, OpSpec
from offload_gpu_opencl._shapes import constant_ints, need, required, window, window_limits

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


def mean_limits(node: Node, sg: Subgraph) -> None:
    """Constant axes, and an output of one value per batch and channel: the mean over height
    and width that ends image classifiers (LiteRT's GPU delegate takes any axes; the kernels
    compute this one). Judged from the core's output shape, so axis spellings (negative,
    repeated, size-1 axes) are resolved by the core's rule."""
    constant_ints(sg, required(node, sg, 1, "axes"), "axes (input 1)")
    shape = tuple(int(d) for d in required(node, sg, 0, "input").shape)
    need(len(shape) == 4, f"input must have rank 4 (NHWC), found {list(shape)}")
    n, _, _, c = shape
    rule = output_shapes(node, sg) or [None]  # checked_shapes has run the rule already
    out = tuple(rule[0] or ())
    need(
        out in ((n, 1, 1, c), (n, c)),
        f"only the mean over height and width is supported (output [{n}, 1, 1, {c}] or "
        f"[{n}, {c}] for input {list(shape)}), found output {list(out)}",
    )


# cl/pool.cl's mean_hw: its reqd_work_group_size.
MEAN_GROUP = (64, 1)


def lower_mean(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    n, h, wd, c = lw.tensor(x).shape
    cb = (c + 7) // 8
    act = kernel_act(node, lw.subgraph)
    if lw.gpu_family:  # a group of 64 per 8 channels: the image summed in parallel
        lw.launch(
            node,
            "mean_hw",
            (cb * MEAN_GROUP[0], n),
            *(lw.ref(x), lw.out(node), h * wd, c, act),
            local=MEAN_GROUP,
        )
        return
    # A window of the whole image: the pool sums each channel in input order, as LiteRT's
    # reference MEAN does, and divides by H * W.
    window_args = (h, wd, c, 1, 1, h, wd, 1, 1, 0, 0, _KIND["AVERAGE_POOL_2D"], act)
    local = lw.shapes.rows_local(cb)
    lw.launch(node, "pool", (cb, 1, n), lw.ref(x), lw.out(node), *window_args, local=local)


SPECS = (
    *(
        OpSpec(
            op=op,
            limits=limits,
            lower=lower,
            quantized_versions=(1, 2),
            fused_activations=FUSED_ACTIVATIONS,
        )
        for op in _KIND
    ),
    OpSpec(
        op="MEAN",
        limits=mean_limits,
        lower=lower_mean,
        versions=(1, 3),
        dtypes=FLOAT_DTYPES,
        constant_inputs=(1,),
    ),
)

"""TRANSPOSE_CONV: one output element per work-item, weights in TFLite's [Co][KH][KW][Ci]."""

from __future__ import annotations

import numpy as np

from offload import Node, Subgraph
from offload.geometry import geometry
from offload_gpu_opencl._ir import INT_MAX, Lowering, Shape, act
from offload_gpu_opencl._ops._spec import OpSpec, constant_weights_reason
from offload_gpu_opencl._shapes import bias, constant_ints, dims, need, nhwc, required, rule_reason

__all__ = ["SPECS"]


def shapes(node: Node, sg: Subgraph) -> list[Shape]:
    out = constant_ints(sg, required(node, sg, 0, "output_shape"), "output_shape (input 0)")
    co, kh, kw, ci = dims(required(node, sg, 1, "weights"), 4, "weights")
    n, h, w, c = nhwc(required(node, sg, 2, "input"), "input")
    need(len(out) == 4, f"output_shape must hold 4 values, found {out}")
    need(c == ci, f"input channels ({c}) must equal the weights' depth ({ci})")
    need(
        out[0] == n and out[3] == co,
        f"output_shape {out} must keep the batch ({n}) and have the weights' {co} channels",
    )
    bias(node, sg, 3, co)
    o = node.options
    strides = [int(o.get("stride_h", 1)), int(o.get("stride_w", 1))]
    need(min(strides) >= 1, f"stride must be >= 1, found {strides}")
    need(o.get("padding") in ("SAME", "VALID"), "padding must be SAME or VALID")
    need(max(out[1] + kh, out[2] + kw) * max(strides) <= INT_MAX // 4, "window too large")
    # LiteRT's check (transpose_conv.cc): the convolution this one inverts must map the
    # output back onto the input; the padding the kernel uses assumes it does.
    g = geometry(o.padding, (out[1], out[2]), (kh, kw), (strides[0], strides[1]))
    need(
        (g.out_h, g.out_w) == (h, w),
        f"output_shape {out} does not map back onto the {h}x{w} input with stride {strides} "
        f"and {o.padding} padding (that gives {g.out_h}x{g.out_w})",
    )
    return [tuple(out)]


def check(node: Node, subgraph: Subgraph) -> str | None:
    return constant_weights_reason(node, subgraph, (1, 3)) or rule_reason(node, subgraph, shapes)


def lower(lw: Lowering, node: Node) -> None:
    w, x = node.inputs[1], node.inputs[2]
    b = node.inputs[3] if len(node.inputs) > 3 else -1
    n, h, wd, ci = lw.tensor(x).shape
    co, kh, kw, _ = lw.tensor(w).shape
    _, oh, ow, _ = lw.tensor(node.outputs[0]).shape
    o = node.options
    sh, sw = o.stride_h, o.stride_w
    pt = pl = 0
    if o.padding == "SAME":
        pt = max((h - 1) * sh + kh - oh, 0) // 2
        pl = max((wd - 1) * sw + kw - ow, 0) // 2
    wt = lw.const(f"w{node.index}", lambda: lw.value(w), param=True)
    bias_ref = lw.const(
        f"b{node.index}",
        lambda: lw.value(b).reshape(co) if b >= 0 else np.zeros(co, np.float32),
        param=True,
    )
    total = n * oh * ow * co
    lw.launch(
        node,
        "transpose_conv",
        (total,),
        lw.ref(x),
        wt,
        bias_ref,
        lw.out(node),
        total,
        h,
        wd,
        ci,
        oh,
        ow,
        co,
        kh,
        kw,
        sh,
        sw,
        pt,
        pl,
        act(node),
    )
    lw.finish(node)


SPECS = (
    OpSpec(
        op="TRANSPOSE_CONV",
        shapes=shapes,
        lower=lower,
        quantized_versions=(1, 2),
        constant_inputs=(0,),
        constraints=("output_shape, weights and bias constant",),
        check=check,
    ),
)

"""TRANSPOSE_CONV: one output element per work-item, weights in TFLite's [Co][KH][KW][Ci]."""

from __future__ import annotations

import numpy as np

from offload import Node, Subgraph
from offload.geometry import geometry
from offload_gpu_opencl._ir import INT_MAX, Lowering, act
from offload_gpu_opencl._ops._spec import OpSpec, constant_weights_reason
from offload_gpu_opencl._shapes import constant_ints, need, required, rule_reason

__all__ = ["SPECS"]


def limits(node: Node, sg: Subgraph) -> None:
    """A constant output_shape (read on the host) that the convolution this one inverts maps
    back onto the input, which the kernel's padding assumes; a window within 32-bit indices.
    The core's rule has checked the operands, batch and channels."""
    out = constant_ints(sg, required(node, sg, 0, "output_shape"), "output_shape (input 0)")
    _, kh, kw, _ = (int(d) for d in sg.tensors[node.inputs[1]].shape)
    _, h, w, _ = (int(d) for d in sg.tensors[node.inputs[2]].shape)
    o = node.options
    strides = (int(o.get("stride_h", 1)), int(o.get("stride_w", 1)))
    need(o.get("padding") in ("SAME", "VALID"), "padding must be SAME or VALID")
    need(max(out[1] + kh, out[2] + kw) * max(strides) <= INT_MAX // 4, "window too large")
    g = geometry(o.padding, (out[1], out[2]), (kh, kw), strides)
    need(
        (g.out_h, g.out_w) == (h, w),
        f"output_shape {out} does not map back onto the {h}x{w} input with stride "
        f"{list(strides)} and {o.padding} padding (that gives {g.out_h}x{g.out_w})",
    )


def check(node: Node, subgraph: Subgraph) -> str | None:
    return constant_weights_reason(node, subgraph, (1, 3)) or rule_reason(node, subgraph, limits)


def lower(lw: Lowering, node: Node) -> None:
    w, x = node.inputs[1], node.inputs[2]
    b = node.inputs[3] if len(node.inputs) > 3 else -1
    n, h, wd, ci = lw.tensor(x).shape
    co, kh, kw, _ = lw.tensor(w).shape
    _, oh, ow, _ = lw.tensor(node.outputs[0]).shape
    o = node.options
    sh, sw = o.stride_h, o.stride_w
    # The padding of the convolution this one inverts (its input is this one's output).
    g = geometry(o.padding, (oh, ow), (kh, kw), (sh, sw))
    pt, pl = g.pad_top, g.pad_left
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
        lower=lower,
        quantized_versions=(1, 2),
        constant_inputs=(0,),
        constraints=("output_shape, weights and bias constant",),
        check=check,
    ),
)

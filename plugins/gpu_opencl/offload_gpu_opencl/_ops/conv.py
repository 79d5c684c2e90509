"""CONV_2D: a register-blocked matmul for 1x1 stride-1 convolutions, conv2d otherwise; both
run the fused epilogue (see _fusion). Weights are pre-transformed once: [Ci][Co8] for the
matmul, [KH][KW][Ci][Co8] for conv2d. In the GPU kernel family (_tiling) the same weights
feed a tiled GEMM (1x1 stride 1) or an implicit-GEMM convolution (every other window)."""

from __future__ import annotations

import numpy as np

from offload import Node, Subgraph
from offload_gpu_opencl._ir import BLOCKS, Lowering, Shape, pad_last
from offload_gpu_opencl._ops._spec import FUSED_ACTIVATIONS, OpSpec, constant_weights_reason
from offload_gpu_opencl._shapes import (
    bias,
    dims,
    need,
    nhwc,
    required,
    rule_reason,
    window,
    window_shape,
)
from offload_gpu_opencl._source import blocking
from offload_gpu_opencl._tiling import GemmProblem, launch_gemm

__all__ = ["SPECS"]


def shapes(node: Node, sg: Subgraph) -> list[Shape]:
    n, h, w, ci = nhwc(required(node, sg, 0, "input"), "input")
    co, kh, kw, depth = dims(required(node, sg, 1, "weights"), 4, "weights")
    need(depth == ci, "grouped convolution (weights depth != input channels) is not supported")
    bias(node, sg, 2, co)
    oh, ow = window_shape(node, (h, w), (kh, kw))
    return [(n, oh, ow, co)]


def check(node: Node, subgraph: Subgraph) -> str | None:
    return constant_weights_reason(node, subgraph, (1, 2)) or rule_reason(node, subgraph, shapes)


def lower(lw: Lowering, node: Node) -> None:
    w, b = node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else -1
    x, (n, h, wd, ci), top, left, hp, wp = lw.conv_input(node.inputs[0])
    co, kh, kw, _ = lw.tensor(w).shape
    (sh, sw), (dh, dw), (oh, ow), (pt, pl) = window(node, (hp, wp), (kh, kw), (top, left))
    bias_ref = lw.const(
        f"b{node.index}",
        lambda: pad_last(lw.value(b).reshape(1, co) if b >= 0 else np.zeros((1, co), np.float32)),
        param=True,
    )
    bufs, flags = lw.epilogue(node)
    p = n * oh * ow
    r, v = blocking(co, p)
    counts = (-(-co // (8 * v)), -(-p // r))
    pointwise = kh == kw == 1 and sh == sw == 1 and pt == pl == 0 and (oh, ow) == (h, wd)
    if lw.gemm is not None:
        # [KH][KW][Ci][Co8] is [Ci][Co8] when the window is 1x1: one layout, either kernel.
        wt = lw.const(
            f"w{node.index}", lambda: pad_last(lw.value(w).transpose(1, 2, 3, 0)), param=True
        )
        geometry = (h, wd, ci, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl)
        problem = (
            GemmProblem("gemm", p, ci, co)
            if pointwise
            else GemmProblem("conv", p, kh * kw * ci, co, geometry)
        )
        launch_gemm(lw, node, problem, lw.ref(x), wt, bias_ref, (bufs, flags))
    elif pointwise:
        wt = lw.const(f"w{node.index}", lambda: pad_last(lw.value(w).reshape(co, ci).T), param=True)
        lw.launch(
            node,
            f"matmul_{r}x{v}",
            counts,
            lw.ref(x),
            wt,
            bias_ref,
            *bufs,
            p,
            ci,
            co,
            *flags,
            local=BLOCKS,
        )
    else:
        wt = lw.const(
            f"w{node.index}", lambda: pad_last(lw.value(w).transpose(1, 2, 3, 0)), param=True
        )
        lw.launch(
            node,
            f"conv2d_{r}x{v}",
            counts,
            lw.ref(x),
            wt,
            bias_ref,
            lw.zeros(ci),
            *bufs,
            p,
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
            dh,
            dw,
            pt,
            pl,
            *flags,
            local=BLOCKS,
        )
    if node.index not in lw.epilogues:
        lw.finish(node)


SPECS = (
    OpSpec(
        op="CONV_2D",
        shapes=shapes,
        lower=lower,
        # Hybrid (dynamic-range) versions run as float convolutions on dequantized weights:
        # v2 and v5. The int16 and sparse versions in between stay out through the dtype and
        # constant-weight checks.
        quantized_versions=(1, 5),
        fused_activations=FUSED_ACTIVATIONS,
        constraints=(
            "weights and bias constant (float16 and sparse ones arrive folded by the core)",
            "no grouped convolution",
        ),
        check=check,
    ),
)

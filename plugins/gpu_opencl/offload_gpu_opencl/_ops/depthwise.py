"""DEPTHWISE_CONV_2D: with multiplier 1, dw3x3 (3x3, stride 1 or 2, weights in registers) or
dwconv, both running the fused epilogue; any other multiplier, dwconv_any (no epilogue)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from offload import Node, Subgraph
from offload_gpu_opencl._ir import Lowering, Ref, act, pad_last
from offload_gpu_opencl._ops._spec import FUSED_ACTIVATIONS, OpSpec, constant_weights_reason
from offload_gpu_opencl._shapes import rule_reason, window, window_limits

__all__ = ["SPECS", "Depthwise", "depthwise"]


def limits(node: Node, sg: Subgraph) -> None:
    """A window within 32-bit indices."""
    _, kh, kw, _ = (int(d) for d in sg.tensors[node.inputs[1]].shape)
    window_limits(node, sg, (kh, kw))


def check(node: Node, subgraph: Subgraph) -> str | None:
    return constant_weights_reason(node, subgraph, (1, 2)) or rule_reason(node, subgraph, limits)


@dataclass(frozen=True)
class Depthwise:
    """A multiplier-1 DEPTHWISE_CONV_2D as its kernels take it: the input read (a folded PAD
    read through), its NHWC shape, the window (H, W, C, OH, OW, KH, KW, SH, SW, DH, DW, PT,
    PL) and the weights [KH][KW][C8] and bias [C8]. dwconv, dw3x3 and a 1x1 product's fused
    A loader (tdw_*) read the same constants."""

    x: int
    shape: tuple[int, ...]
    geometry: tuple[int, ...]
    weights: Ref
    bias: Ref


def depthwise(lw: Lowering, node: Node) -> Depthwise:
    w, b = node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else -1
    x, (n, h, wd, c), top, left, hp, wp = lw.conv_input(node.inputs[0])
    _, kh, kw, co = lw.tensor(w).shape
    (sh, sw), (dh, dw), (oh, ow), (pt, pl) = window(node, (hp, wp), (kh, kw), (top, left))
    wt = lw.const(f"w{node.index}", lambda: pad_last(lw.value(w).reshape(kh, kw, co)), param=True)
    bias_ref = lw.const(f"b{node.index}", lambda: pad_last(_bias_values(lw, b, co)), param=True)
    geometry = (h, wd, c, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl)
    return Depthwise(x, (n, h, wd, c), tuple(int(g) for g in geometry), wt, bias_ref)


def _bias_values(lw: Lowering, b: int, co: int) -> np.ndarray:
    return lw.value(b).reshape(co) if b >= 0 else np.zeros(co, np.float32)


def lower(lw: Lowering, node: Node) -> None:
    w, b = node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else -1
    x, (n, h, wd, c), top, left, hp, wp = lw.conv_input(node.inputs[0])
    _, kh, kw, co = lw.tensor(w).shape
    (sh, sw), (dh, dw), (oh, ow), (pt, pl) = window(node, (hp, wp), (kh, kw), (top, left))
    m = co // c

    if m == 1:
        dwc = depthwise(lw, node)
        wt, bias_ref = dwc.weights, dwc.bias
        bufs, flags = lw.epilogue(node)
        cb = (c + 7) // 8
        if kh == kw == 3 and sh == sw and sh in (1, 2) and dh == dw == 1:
            lw.launch(
                node,
                f"dw3x3_s{sh}",
                (cb, -(-ow // 4), n * oh),
                lw.ref(x),
                wt,
                bias_ref,
                lw.zeros(8),
                *bufs,
                h,
                wd,
                c,
                oh,
                ow,
                pt,
                pl,
                *flags,
                local=lw.shapes.rows_local(cb),
            )
        else:
            lw.launch(
                node,
                "dwconv",
                (cb, ow, n * oh),
                lw.ref(x),
                wt,
                bias_ref,
                *bufs,
                h,
                wd,
                c,
                oh,
                ow,
                kh,
                kw,
                sh,
                sw,
                dh,
                dw,
                pt,
                pl,
                *flags,
                local=lw.shapes.rows_local(cb),
            )
    else:
        wt = lw.const(f"w{node.index}", lambda: lw.value(w).reshape(kh, kw, co), param=True)
        bias_ref = lw.const(f"b{node.index}", lambda: _bias_values(lw, b, co), param=True)
        total = n * oh * ow * co
        lw.launch(
            node,
            "dwconv_any",
            (total,),
            lw.ref(x),
            wt,
            bias_ref,
            lw.out(node),
            total,
            h,
            wd,
            c,
            oh,
            ow,
            co,
            m,
            kh,
            kw,
            sh,
            sw,
            dh,
            dw,
            pt,
            pl,
            act(node),
        )
    if node.index not in lw.epilogues:
        lw.finish(node)


SPECS = (
    OpSpec(
        op="DEPTHWISE_CONV_2D",
        lower=lower,
        versions=(1, 2),
        # Hybrid (dynamic-range) v4 and v6 run as float convolutions on dequantized weights.
        quantized_versions=(1, 6),
        fused_activations=FUSED_ACTIVATIONS,
        constraints=("weights and bias constant",),
        check=check,
    ),
)

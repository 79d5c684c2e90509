"""CONV_2D: a register-blocked matmul for 1x1 stride-1 convolutions, conv2d otherwise; both
run the fused epilogue (see _fusion). Weights are pre-transformed once: [Ci][Co8] for the
matmul, [KH][KW][Ci][Co8] for conv2d. In the GPU kernel family (_tiling) the same weights
feed a tiled GEMM (1x1 stride 1) or an implicit-GEMM convolution (every other window)."""

from __future__ import annotations

from offload import Node, Subgraph
from offload_gpu_opencl._ir import BLOCKS, Lowering, Ref, kernel_act, pad_last
from offload_gpu_opencl._ops._spec import (
    FUSED_ACTIVATIONS,
    OpSpec,
    bias_row,
    constant_weights_reason,
)
from offload_gpu_opencl._ops.depthwise import depthwise
from offload_gpu_opencl._shapes import need, rule_reason, window, window_limits
from offload_gpu_opencl._source import blocking
from offload_gpu_opencl._tiling import GemmProblem, launch_gemm, launch_matmul

__all__ = ["SPECS"]


def limits(node: Node, sg: Subgraph) -> None:
    """No grouped convolution; a window within 32-bit indices."""
    ci = int(sg.tensors[node.inputs[0]].shape[3])
    _, kh, kw, depth = (int(d) for d in sg.tensors[node.inputs[1]].shape)
    need(depth == ci, "grouped convolution (weights depth != input channels) is not supported")
    window_limits(node, sg, (kh, kw))


def check(node: Node, subgraph: Subgraph) -> str | None:
    return constant_weights_reason(node, subgraph, (1, 2)) or rule_reason(node, subgraph, limits)


def lower(lw: Lowering, node: Node) -> None:
    if node.index in lw.squeezes:
        squeeze_excite_gate(lw, node)
        return
    w, b = node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else -1
    x, (n, h, wd, ci), top, left, hp, wp = lw.conv_input(node.inputs[0])
    co, kh, kw, _ = lw.tensor(w).shape
    (sh, sw), (dh, dw), (oh, ow), (pt, pl) = window(node, (hp, wp), (kh, kw), (top, left))
    bias_ref = bias_row(lw, node, b, co)
    bufs, flags = lw.epilogue(node)
    p = n * oh * ow
    pointwise = kh == kw == 1 and sh == sw == 1 and pt == pl == 0 and (oh, ow) == (h, wd)
    if pointwise:
        wt = pointwise_weights(lw, node)
        if node.index in lw.depthwise_into:
            # The depthwise convolution whose output this reads runs in the product's A
            # loader (tdw_*, see _fusion), from its own input and constants.
            source, code = lw.depthwise_into[node.index]
            dwc = depthwise(lw, lw.subgraph.nodes[source])
            problem = GemmProblem("dw", p, ci, co, dwc.geometry)
            launch_gemm(
                lw, node, problem, lw.ref(dwc.x), wt, bias_ref, (bufs, flags),
                depthwise=(dwc.weights, dwc.bias, code),
            )  # fmt: skip
        elif node.index in lw.gated:
            # The squeeze-excite MUL whose output this reads runs in the product's A loader
            # (_fusion): x scaled by the gate row of its image.
            source, gate, code = lw.gated[node.index]
            launch_matmul(
                lw, node, lw.ref(source), wt, bias_ref, (bufs, flags), p, ci, co,
                gate=(lw.ref(gate), oh * ow if lw.tensor(gate).shape[0] == n else p, code),
            )  # fmt: skip
        else:
            launch_matmul(lw, node, lw.ref(x), wt, bias_ref, (bufs, flags), p, ci, co)
        if node.index not in lw.epilogues:
            lw.finish(node)
        return
    wt = lw.const(f"w{node.index}", lambda: pad_last(lw.value(w).transpose(1, 2, 3, 0)), param=True)
    if lw.gemm is not None:
        geometry = (h, wd, ci, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl)
        problem = GemmProblem("conv", p, kh * kw * ci, co, geometry)
        launch_gemm(lw, node, problem, lw.ref(x), wt, bias_ref, (bufs, flags))
    else:
        r, v = blocking(co, p)
        lw.launch(
            node,
            f"conv2d_{r}x{v}",
            (-(-co // (8 * v)), -(-p // r)),
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


def pointwise_weights(lw: Lowering, node: Node) -> Ref:
    """A 1x1 CONV_2D's weights [Co][1][1][Ci] as the products read them: [Ci][Co8]."""
    w = node.inputs[1]
    co, _, _, ci = lw.tensor(w).shape
    return lw.const(f"w{node.index}", lambda: pad_last(lw.value(w).reshape(co, ci).T), param=True)


# cl/se_gate.cl's reqd_work_group_size: one group per image.
SE_GROUP = (256, 1)


def squeeze_excite_gate(lw: Lowering, second: Node) -> None:
    """The MEAN and the 1x1 CONV_2D planned into ``second``'s launch (_fusion), run with it
    as one se_gate launch: the pooled vector, the first product's output and the gate are
    each stored to their own tensor, as their own launches would."""
    sg = lw.subgraph
    mean, first = (sg.nodes[i] for i in lw.squeezes[second.index])
    n, h, wd, c = lw.tensor(mean.inputs[0]).shape
    stages: list[object] = []
    flags: list[int] = []
    outputs: list[object] = []
    for conv in (first, second):
        co = lw.tensor(conv.inputs[1]).shape[0]
        weights = pointwise_weights(lw, conv)
        bias = bias_row(lw, conv, conv.inputs[2] if len(conv.inputs) > 2 else -1, co)
        (res, alpha, y), conv_flags = lw.epilogue(conv)
        stages += [weights, bias, res, alpha]
        flags.append(co)
        flags += conv_flags
        outputs.append(y)
    lw.launch(
        second, "se_gate", (SE_GROUP[0], n), lw.ref(mean.inputs[0]), *stages, lw.out(mean),
        *outputs, h * wd, c, kernel_act(mean, sg), *flags, local=SE_GROUP,
    )  # fmt: skip


SPECS = (
    OpSpec(
        op="CONV_2D",
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

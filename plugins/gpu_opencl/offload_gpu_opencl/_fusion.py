"""Fusion planning: which nodes of a partition need no launch of their own.

Elementwise nodes that follow a convolution run in its epilogue, zero PADs of H and W fold
into the padding of the convolutions that read them, and in the GPU kernel family products
write their results straight into the CONCATENATION that reads them. The plan is written
into the :class:`Lowering` (``skip``, ``epilogues``, ``pad_folds``, ``placed``) before any op
is lowered.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from offload import Node
from offload_gpu_opencl._ir import (
    ACTIVATIONS,
    FINITE,
    HARD_SWISH,
    QUANTIZED,
    RELU6_SIXTH,
    Epilogue,
    Lowering,
    act,
    clamped,
    elements,
    kernel_act,
)

__all__ = ["plan_fusion"]

_CONVS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")
_RELUS = {"RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3}  # as ACTIVATIONS codes
# Producers of a residual that may be lowered early, just before the convolution that adds
# it: they read only their input, write only their output.
_HOISTABLE = ("MAX_POOL_2D", "AVERAGE_POOL_2D", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR")


def plan_fusion(lw: Lowering) -> None:
    """Decide which nodes run inside another node's launch.

    * A convolution (CONV_2D, DEPTHWISE_CONV_2D with multiplier 1, FULLY_CONNECTED) absorbs the
      chain that follows it: a RELU-type op or a HARD_SWISH (when it has no activation of its
      own: MobileNetV3's 19 HARD_SWISH launches), a MUL by the constant 1/6 after a RELU6
      (MobileNetV3's hard sigmoid), a residual
      ADD of a same-shape tensor (or of a tensor zero-padded on channels by a PAD, which is
      absorbed too), a RELU-type op after the ADD, a PRELU with constant per-channel slopes.
      Each absorbed link's input must have no other reader and stay inside the partition, and
      the residual must be computed before the convolution's launch, or be a pooling or resize
      whose inputs are, which is then lowered just before the convolution (``hoisted``). In
      the GPU family a CONV_2D's residual that is a MAX_POOL_2D with 2x2 windows tiling its
      input is taken from the pool's input by the tiled kernel itself (``Epilogue.pool``):
      the pool has no launch.
    * A zero PAD of H and W whose readers are all convolutions (as their input) is folded into
      their padding.
    * GPU family: a 1x1 stride-1 CONV_2D computes its input in its A loader where only it
      reads it, when that input is a depthwise convolution's (``fuse_depthwise``) or a
      squeeze-excite MUL of x by a per-image, per-channel gate (``fuse_gates``); and the
      gate itself, a MEAN and two 1x1 CONV_2Ds, is one launch (``fuse_gates``).

    Quantized tensors are never fused through (their fake-quantize step must run).
    """
    sg, part = lw.subgraph, lw.partition
    pos = {n: i for i, n in enumerate(part.nodes)}
    consumers = sg.consumers()
    boundary = set(part.outputs) | set(sg.outputs)

    def plain(t: int) -> bool:
        return lw.tensor(t).dtype not in QUANTIZED

    def sole(t: int) -> Node | None:
        users = consumers.get(t, [])
        if t in boundary or len(users) != 1 or users[0] not in pos or not plain(t):
            return None
        return sg.nodes[users[0]]

    def ready(t: int, at: int) -> bool:
        if lw.is_folded(t):
            return True
        producer = lw.producers.get(t)
        return producer is None or producer not in pos or pos[producer] < at

    def pads(node: Node) -> np.ndarray | None:
        if len(node.inputs) < 2 or not lw.tensor(node.inputs[1]).is_constant:
            return None
        p = np.asarray(lw.tensor(node.inputs[1]).constant_value(), np.int64).reshape(-1, 2)
        return p if len(p) == len(lw.tensor(node.inputs[0]).shape) and (p >= 0).all() else None

    def pooled(t: int, reader: Node, conv: int) -> Node | None:
        """GPU family: the MAX_POOL_2D that makes ``t`` for ``reader`` alone, with 2x2
        windows that tile its input exactly (stride 2, no padding, no activation: every such
        pool in the face and landmark models), from an input there before ``conv``, a
        CONV_2D, whose tiled kernel can take each window's maximum."""
        producer = lw.producers.get(t)
        if lw.gemm is None or sg.nodes[conv].op != "CONV_2D" or producer not in pos:
            return None
        pool = sg.nodes[producer]
        if pool.op != "MAX_POOL_2D" or producer in lw.skip or sole(t) is not reader:
            return None
        if producer in lw.hoisted.values():
            return None
        o = pool.options
        if not o.filter_height == o.filter_width == o.stride_h == o.stride_w == 2 or act(pool):
            return None
        _, ih, iw, _ = lw.tensor(pool.inputs[0]).shape
        _, oh, ow, _ = lw.tensor(t).shape
        if (ih, iw) != (oh * 2, ow * 2) or not ready(pool.inputs[0], pos[conv]):
            return None
        return pool

    def residual(
        other: int, add: Node, shape: tuple[int, ...], conv: int
    ) -> tuple[int, int, int] | None:
        at = pos[conv]
        producer = lw.producers.get(other)
        if producer in pos and sg.nodes[producer].op == "PAD" and sole(other) is add:
            pad = sg.nodes[producer]
            p, src = pads(pad), pad.inputs[0]
            src_shape = lw.tensor(src).shape
            pool = pooled(src, pad, conv)
            if (
                p is not None
                and not p[:-1].any()
                and p[-1][0] == 0
                and tuple(src_shape[:-1]) == tuple(shape[:-1])
                and (pool is not None or ready(src, at))
            ):
                lw.skip.add(pad.index)
                if pool is not None:
                    lw.skip.add(pool.index)
                    return pool.inputs[0], int(src_shape[-1]), pool.index
                return src, int(src_shape[-1]), -1
        if tuple(lw.tensor(other).shape) != tuple(shape):
            return None
        pool = pooled(other, add, conv)
        if pool is not None:
            lw.skip.add(pool.index)
            return pool.inputs[0], int(shape[-1]), pool.index
        if ready(other, at):
            return other, int(shape[-1]), -1
        # A residual made later by a pooling or resize whose own inputs are there already
        # (BlazeFace's and the landmark models' MAX_POOL branch): that node is lowered just
        # before the convolution instead, and the ADD fused.
        producer = lw.producers.get(other)
        if (
            producer in pos
            and sg.nodes[producer].op in _HOISTABLE
            and producer not in lw.skip
            and producer not in lw.hoisted.values()
            and conv not in lw.hoisted
            and all(ready(t, at) for t in sg.nodes[producer].inputs if t >= 0)
        ):
            lw.hoisted[conv] = producer
            return other, int(shape[-1]), -1
        return None

    for n in part.nodes:
        node = sg.nodes[n]
        if node.op not in _CONVS or n in lw.skip or not plain(node.outputs[0]):
            continue
        if node.op == "DEPTHWISE_CONV_2D" and (
            lw.tensor(node.inputs[1]).shape[3] != lw.tensor(node.inputs[0]).shape[3]
        ):
            continue  # multiplier > 1: dwconv_any has no epilogue
        t = node.outputs[0]
        shape = tuple(lw.tensor(t).shape)
        ep = Epilogue(out=t, act=kernel_act(node, sg))
        fused: list[Node] = []
        nxt = sole(t)
        # The activation links: a RELU-type op or HARD_SWISH, then a MUL by 1/6 after RELU6.
        while nxt is not None and plain(nxt.outputs[0]):
            code = _activation_after(lw, ep.act, nxt, t)
            if code is None:
                break
            ep.act, t = code, nxt.outputs[0]
            fused.append(nxt)
            nxt = sole(t)
        if (
            nxt is not None
            and nxt.op == "ADD"
            and len(nxt.inputs) == 2
            and nxt.inputs[0] != nxt.inputs[1]
            and plain(nxt.outputs[0])
            and tuple(lw.tensor(nxt.outputs[0]).shape) == shape
        ):
            other = nxt.inputs[1] if nxt.inputs[0] == t else nxt.inputs[0]
            found = residual(other, nxt, shape, n)
            if found is not None:
                ep.residual, ep.channels, ep.pool = found
                ep.act2, t = kernel_act(nxt, sg), nxt.outputs[0]
                fused.append(nxt)
                nxt = sole(t)
                relu = _relu_after(ep.act2, nxt)
                if relu is not None and nxt is not None and plain(nxt.outputs[0]):
                    ep.act2, t = relu, nxt.outputs[0]
                    fused.append(nxt)
                    nxt = sole(t)
        if (
            nxt is not None
            and nxt.op == "PRELU"
            and nxt.inputs[0] == t
            and plain(nxt.outputs[0])
            and tuple(lw.tensor(nxt.outputs[0]).shape) == shape
            and lw.is_folded(nxt.inputs[1])
        ):
            alpha_shape = lw.tensor(nxt.inputs[1]).shape
            if elements(alpha_shape) == shape[-1] and alpha_shape[-1] == shape[-1]:
                ep.alpha, t = nxt.inputs[1], nxt.outputs[0]
                fused.append(nxt)
        if fused:
            ep.out = t
            lw.epilogues[n] = ep
            lw.skip.update(f.index for f in fused)

    for n in part.nodes:
        node = sg.nodes[n]
        if node.op != "PAD" or n in lw.skip or node.outputs[0] in boundary:
            continue
        out, src = node.outputs[0], node.inputs[0]
        users = consumers.get(out, [])
        p = pads(node)
        if p is None or len(p) != 4 or p[0].any() or p[3].any() or not users or lw.is_folded(src):
            continue
        if all(
            u in pos
            and sg.nodes[u].op in ("CONV_2D", "DEPTHWISE_CONV_2D")
            and sg.nodes[u].inputs[0] == out
            and out not in sg.nodes[u].inputs[1:]
            for u in users
        ):
            _, h, w, _ = lw.tensor(src).shape
            lw.pad_folds[out] = (
                src,
                int(p[1][0]),
                int(p[2][0]),
                int(h + p[1].sum()),
                int(w + p[2].sum()),
            )
            lw.skip.add(n)

    if lw.gemm is not None:
        _place_concatenated(lw, pos, sole)
    if lw.fuse_depthwise:
        _depthwise_into_pointwise(lw, sole)
    if lw.fuse_gates:
        _gate_into_pointwise(lw, sole)
        _squeeze_excite_gates(lw, sole)


def _depthwise_into_pointwise(lw: Lowering, sole: Callable[[int], Node | None]) -> None:
    """GPU family, fuse_depthwise: a DEPTHWISE_CONV_2D (multiplier 1) whose output, after at
    most an activation fused into it, only a 1x1 stride-1 CONV_2D reads, runs inside that
    product's A loader (tdw_*): one launch and one intermediate tensor fewer. The conv keeps
    its own epilogue; the depthwise convolution's activation goes with it."""
    sg = lw.subgraph
    for n in lw.partition.nodes:
        node = sg.nodes[n]
        if node.op != "DEPTHWISE_CONV_2D" or n in lw.skip:
            continue
        if lw.tensor(node.inputs[1]).shape[3] != lw.tensor(node.inputs[0]).shape[3]:
            continue  # multiplier > 1
        ep = lw.epilogues.get(n)
        if ep is not None and (ep.residual >= 0 or ep.alpha >= 0):
            continue
        out = ep.out if ep is not None else node.outputs[0]
        code = ep.act if ep is not None else kernel_act(node, sg)
        # None for a quantized ``out`` (its fake-quantize must run); an epilogue exists only
        # where the depthwise output itself is plain.
        reader = sole(out)
        if not _pointwise_reader(lw, out, reader):
            continue
        assert reader is not None
        lw.depthwise_into[reader.index] = (n, code)
        lw.skip.add(n)
        lw.epilogues.pop(n, None)


def _pointwise_reader(lw: Lowering, t: int, reader: Node | None) -> bool:
    """``reader`` is a 1x1 stride-1 CONV_2D reading ``t`` as its input only, lowered as a
    plain product (no fusion of its input planned yet)."""
    if reader is None or reader.op != "CONV_2D" or reader.inputs[0] != t:
        return False
    if t in reader.inputs[1:] or t in lw.placed:
        return False
    planned = (lw.skip, lw.depthwise_into, lw.gated, lw.squeezes)
    if any(reader.index in nodes for nodes in planned):
        return False
    _, kh, kw, _ = lw.tensor(reader.inputs[1]).shape
    strides = (reader.options.get("stride_h", 1), reader.options.get("stride_w", 1))
    return (kh, kw) == (1, 1) and strides == (1, 1)


def _gate_into_pointwise(lw: Lowering, sole: Callable[[int], Node | None]) -> None:
    """GPU family: a MUL of x [N, H, W, C] by a gate [N or 1, 1, 1, C] (a squeeze-excite
    block's) whose output only a 1x1 stride-1 CONV_2D reads runs in that product's A loader:
    one launch and one tensor fewer. x and the gate are runtime float tensors, made before the
    MUL and so before the product's launch; the MUL's activation goes with it."""
    sg = lw.subgraph
    for n in lw.partition.nodes:
        node = sg.nodes[n]
        if node.op != "MUL" or n in lw.skip or len(node.inputs) != 2:
            continue
        out = node.outputs[0]
        shape = tuple(lw.tensor(out).shape)
        if len(shape) != 4 or node.inputs[0] == node.inputs[1]:
            continue
        found = None
        for x, g in (node.inputs, node.inputs[::-1]):
            gate_shape = tuple(lw.tensor(g).shape)
            if (
                tuple(lw.tensor(x).shape) == shape
                and len(gate_shape) == 4
                and gate_shape[1:] == (1, 1, shape[3])
                and gate_shape[0] in (1, shape[0])
            ):
                found = x, g
                break
        if found is None:
            continue
        x, g = found
        if any(lw.is_folded(t) or lw.tensor(t).dtype != np.float32 for t in found):
            continue
        reader = sole(out)  # None where ``out`` is quantized or read by anything else
        if not _pointwise_reader(lw, out, reader):
            continue
        assert reader is not None
        lw.gated[reader.index] = (x, g, kernel_act(node, sg))
        lw.skip.add(n)


# Multiply-adds per image of the two products an se_gate launch computes in one work-group.
# MobileNetV3-Small's largest squeeze-excite gate has 2 x 576 x 144 (166K); its classifier
# head after the last MEAN (576 x 1024 + 1024 x 1000, 1.6M) is work for many groups.
SQUEEZE_MACS = 1 << 18


def _squeeze_excite_gates(lw: Lowering, sole: Callable[[int], Node | None]) -> None:
    """GPU family: a MEAN over H and W (output [N, 1, 1, C]) that only a 1x1 stride-1 CONV_2D
    reads, whose output (after its fused chain) only another such CONV_2D reads, runs with
    both as one se_gate launch: a squeeze-excite gate's three dependent launches, on vectors
    of a few hundred values, become one. Neither product may have a fused residual ADD or
    write into a concatenation, and together they do at most SQUEEZE_MACS multiply-adds per
    image."""
    sg = lw.subgraph
    for n in lw.partition.nodes:
        node = sg.nodes[n]
        if node.op != "MEAN" or n in lw.skip:
            continue
        shape = tuple(lw.tensor(node.inputs[0]).shape)
        pooled = node.outputs[0]
        if len(shape) != 4 or tuple(lw.tensor(pooled).shape) != (shape[0], 1, 1, shape[3]):
            continue
        first = sole(pooled)  # None where ``pooled`` is quantized or read by anything else
        if not _pointwise_reader(lw, pooled, first):
            continue
        assert first is not None
        hidden = _product_out(lw, first)
        second = sole(hidden) if hidden is not None else None
        if hidden is None or not _pointwise_reader(lw, hidden, second):
            continue
        assert second is not None
        if _product_out(lw, second) is None:
            continue
        width = int(lw.tensor(first.inputs[1]).shape[0])
        if shape[3] * width + width * int(lw.tensor(second.inputs[1]).shape[0]) > SQUEEZE_MACS:
            continue
        lw.squeezes[second.index] = (n, first.index)
        lw.skip.update((n, first.index))


def _product_out(lw: Lowering, conv: Node) -> int | None:
    """The tensor a convolution's launch writes (its fused chain's output), or None when
    that launch adds a residual or writes into a concatenation."""
    ep = lw.epilogues.get(conv.index)
    if ep is not None and ep.residual >= 0:
        return None
    out = ep.out if ep is not None else conv.outputs[0]
    return None if out in lw.placed else out


def _activation_after(lw: Lowering, code: int, node: Node, t: int) -> int | None:
    """The one activation code for activation ``code`` on ``t`` followed by ``node``, or None
    when ``node`` cannot join it: a RELU-type op or a HARD_SWISH after no activation, a MUL by
    the constant 1/6 after RELU6."""
    relu = _relu_after(code, node)
    if relu is not None:
        return relu
    if node.op == "HARD_SWISH" and code == ACTIVATIONS["NONE"]:
        return HARD_SWISH
    if code == ACTIVATIONS["RELU6"] and _times_sixth(lw, node, t):
        return RELU6_SIXTH
    return None


def _times_sixth(lw: Lowering, node: Node, t: int) -> bool:
    """``node`` multiplies ``t`` by a constant scalar float32 1/6 (and nothing else): its
    result equals the RELU6_SIXTH epilogue's, whose values in [0, 1] its finite clamp keeps."""
    if node.op != "MUL" or len(node.inputs) != 2 or act(node) != 0:
        return False
    if t not in node.inputs or node.inputs[0] == node.inputs[1]:
        return False
    other = node.inputs[1] if node.inputs[0] == t else node.inputs[0]
    if not lw.is_folded(other) or elements(lw.tensor(other).shape) != 1:
        return False
    if tuple(lw.tensor(node.outputs[0]).shape) != tuple(lw.tensor(t).shape):
        return False
    value = np.asarray(lw.value(other))
    return value.dtype == np.float32 and value.reshape(-1)[0] == np.float32(1.0 / 6.0)


def _relu_after(code: int, nxt: Node | None) -> int | None:
    """The one activation code for activation ``code`` followed by ``nxt`` when that is a
    RELU-type op and ``code`` applies no activation of its own, else None. A result clamped to
    the finite range (FINITE: a fully connected or an ADD) stays clamped under the RELU."""
    if nxt is None or nxt.op not in _RELUS or code not in (ACTIVATIONS["NONE"], FINITE):
        return None
    relu = _RELUS[nxt.op]
    return clamped(relu) if code == FINITE else relu


def _place_concatenated(
    lw: Lowering, pos: dict[int, int], sole: Callable[[int], Node | None]
) -> None:
    """GPU family: a channel CONCATENATION's inputs that a CONV_2D or FULLY_CONNECTED launch
    writes (its output, or its fused chain's) and that nothing else reads are written by that
    launch into the concatenation's output, at their channel offset (the tiled kernels take a
    row stride and an offset); only the other inputs are copied, and a concatenation left with
    nothing to copy emits nothing (InceptionV3: 50 copies fewer)."""
    sg = lw.subgraph
    writes: dict[int, int] = {}  # tensor -> the product node whose launch writes it
    for n in pos:
        node = sg.nodes[n]
        if node.op in ("CONV_2D", "FULLY_CONNECTED") and n not in lw.skip:
            ep = lw.epilogues.get(n)
            writes[ep.out if ep else node.outputs[0]] = n
    for n in pos:
        node = sg.nodes[n]
        if node.op != "CONCATENATION" or n in lw.skip or act(node) != 0:
            continue
        out = node.outputs[0]
        shape = lw.tensor(out).shape
        if not len(shape) or node.options.get("axis", 0) % len(shape) != len(shape) - 1:
            continue
        if lw.tensor(out).dtype in QUANTIZED:
            continue
        offset, placed = 0, 0
        for t in node.inputs:
            channels = int(lw.tensor(t).shape[-1])
            if t in writes and sole(t) is node and node.inputs.count(t) == 1:
                lw.placed[t] = (out, int(shape[-1]), offset)
                placed += 1
            offset += channels
        if placed == len(node.inputs):
            lw.skip.add(n)

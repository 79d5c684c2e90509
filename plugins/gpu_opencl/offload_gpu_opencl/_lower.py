"""Lowering a partition to a flat list of kernel launches, with constants pre-transformed.

Every tensor of the partition is seen through a *float view*: quantized tensors hold the real
values they stand for (``scale * (q - zero_point)``). Constants, and tensors computed from
constants only (fp16 ``DEQUANTIZE``, ``DENSIFY``), are *folded*: their values are made once here.
Pre-transformed arrays are produced through :meth:`Lowering.const`, which takes them from the
serialization cache when it has them, so a warm start never repeats the work.

Before lowering, :func:`_plan_fusion` decides which nodes need no launch of their own:
elementwise nodes that follow a convolution run in its epilogue, and zero PADs of H and W fold
into the padding of the convolutions that read them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from offload import Node, Partition, Subgraph, Tensor
from offload.ops._conv import geometry, window_options
from offload.ops._quant import dequantize

__all__ = ["ACTIVATIONS", "Ref", "Launch", "Lowering", "foldable", "folded_value"]

ACTIVATIONS = {"NONE": 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3, "TANH": 4, "SIGMOID": 5}
_BINARY = {"ADD": 0, "SUB": 1, "MUL": 2, "MAXIMUM": 3, "MINIMUM": 4, "PRELU": 5, "LOGICAL_AND": 6}
_UNARY = {"RELU": 0, "RELU6": 1, "RELU_N1_TO_1": 2, "LOGISTIC": 3, "TANH": 4, "EXP": 5}
_COPY = 6  # unary8 op that copies
_QUANTIZED = {np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16)}
# Ops whose output values are a subset of their input values: no fake quantization needed.
_MOVES = {"RESHAPE", "DEQUANTIZE", "PAD", "MAX_POOL_2D", "STRIDED_SLICE", "CONCATENATION"}


@dataclass(frozen=True)
class Ref:
    """A buffer argument: a runtime tensor (``kind == "t"``) or a named constant (``"c"``)."""

    kind: str
    key: int | str


@dataclass
class Launch:
    """One kernel enqueue: function name, NDRange, arguments in signature order."""

    kernel: str
    global_size: tuple[int, ...]
    local_size: tuple[int, ...]
    args: list[Ref | np.int32 | np.float32]
    node: int

    @property
    def buffers(self) -> list[Ref]:
        """Buffer arguments: inputs first, the written buffer last."""
        return [a for a in self.args if isinstance(a, Ref)]


@dataclass
class Epilogue:
    """What a convolution's launch applies after accumulating: its own activation, then the
    nodes fused into it (a residual ADD, RELU-type ops, a PRELU). ``out`` is the tensor the
    launch writes: the output of the last fused node."""

    out: int
    act: int = 0
    residual: int = -1  # tensor added by a fused ADD, -1 for none
    channels: int = 0  # residual channels; fewer than the output's when a channel PAD was absorbed
    act2: int = 0  # the ADD's activation (or a RELU-type op after it)
    alpha: int = -1  # constant PRELU slopes, -1 for none


# Work-group shapes. PoCL compiles a work-group function per (kernel, local size) at the first
# enqueue, so each kernel family uses one fixed shape (measured: compiles fall from 44 to 8 per
# model; the group size itself hardly matters there, ~2 ns per group). Dimension 0 of the
# blocked kernels (channel blocks) and the last dimension of row kernels (image rows) are
# exact; the others are rounded up to the group size and guarded by the kernels.
_LINEAR = (64,)  # 1-D kernels over elements (or 8-element vectors)
_BLOCKS = (1, 16)  # matmul / conv2d: (channel blocks, pixel blocks)
_ROWS = (1, 16, 1)  # dw3x3 / dwconv / pool / resize: (channel blocks, x, N*OH)
_LANES = (16, 1)  # binary8: (8-element blocks of a row, rows)


def _grid(counts: tuple[int, ...], local: tuple[int, ...]) -> tuple[int, ...]:
    """Global size covering ``counts`` items per dimension, rounded up to ``local``."""
    return tuple(-(-max(int(c), 1) // size) * size for c, size in zip(counts, local))


@dataclass
class Lowering:
    subgraph: Subgraph
    partition: Partition
    cached: dict[str, np.ndarray] = field(default_factory=dict)
    launches: list[Launch] = field(default_factory=list)
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    alias: dict[int, int] = field(default_factory=dict)
    misses: int = 0
    # Fusion plan (made before lowering, see _plan_fusion): nodes that emit nothing, the
    # epilogue of each convolution that absorbed them, spatial PADs folded into convolutions.
    skip: set[int] = field(default_factory=set)
    epilogues: dict[int, Epilogue] = field(default_factory=dict)
    pad_folds: dict[int, tuple[int, int, int, int, int]] = field(default_factory=dict)
    params: set[str] = field(default_factory=set)
    # Storages that a launch overwrites although they belong to a node input (the previous
    # activation and state of a BASIC LSTM): a partition input among them is read back.
    writebacks: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.producers = self.subgraph.producers()
        _plan_fusion(self)
        for n in self.partition.nodes:
            if n in self.skip:
                continue
            node = self.subgraph.nodes[n]
            try:
                _LOWER[node.op](self, node)
            except Exception as exc:
                raise type(exc)(f"{node.describe()}: {exc}") from exc

    # -- tensors and constants ----------------------------------------------------------------

    def tensor(self, t: int) -> Tensor:
        return self.subgraph.tensors[t]

    def is_folded(self, t: int) -> bool:
        return foldable(self.subgraph, t, self.producers)

    def value(self, t: int) -> np.ndarray:
        return folded_value(self.subgraph, t, self.producers)

    def const(self, name: str, make: Callable[[], np.ndarray], param: bool = False) -> Ref:
        """A pre-transformed constant: from the cache if present, else made now (float32).

        ``param``: a convolution parameter (weights, bias, PRELU slopes; kernels read it as
        ``param_t``), which may be stored in another precision than tensors (_source)."""
        if param:
            self.params.add(name)
        if name not in self.consts:
            arr = self.cached.get(name)
            if arr is None:
                self.misses += 1
                arr = np.ascontiguousarray(make(), dtype=np.float32)
            self.consts[name] = arr
        return Ref("c", name)

    def zeros(self, count: int) -> Ref:
        """A constant of at least ``count`` zeros (rounded up to limit distinct sizes)."""
        size = max(64, 1 << (max(count, 1) - 1).bit_length())
        # A parameter: in whichever precision, zero bits are zeros of both types, and a float32
        # buffer holds at least as many halves.
        return self.const(f"zeros{size}", lambda: np.zeros(size, np.float32), param=True)

    def root(self, t: int) -> int:
        while t in self.alias:
            t = self.alias[t]
        return t

    def ref(self, t: int) -> Ref:
        """A buffer for tensor ``t`` as a kernel input (folded tensors are uploaded once)."""
        if self.is_folded(t):
            return self.const(f"t{t}", lambda: self.value(t))
        return Ref("t", self.root(t))

    def out(self, node: Node, pos: int = 0) -> Ref:
        return Ref("t", node.outputs[pos])

    def launch(
        self,
        node: Node,
        kernel: str,
        counts: tuple[int, ...],
        *args: object,
        local: tuple[int, ...] = _LINEAR,
    ) -> None:
        """Enqueue ``kernel`` over ``counts`` work-items per dimension, in groups of ``local``."""
        values: list[Ref | np.int32 | np.float32] = []
        for a in args:
            if isinstance(a, Ref):
                values.append(a)
            elif isinstance(a, float):
                values.append(np.float32(a))
            else:
                values.append(np.int32(a))
        self.launches.append(Launch(kernel, _grid(counts, local), local, values, node.index))

    def finish(self, node: Node) -> None:
        """After a node: fake-quantize a quantized output so it holds representable values."""
        t = node.outputs[0]
        if not _needs_fake_quant(node, self.tensor(t)):
            return
        tensor = self.tensor(t)
        q = tensor.quantization
        assert q is not None
        info = np.iinfo(tensor.dtype)
        zero = int(q.zero_point[0]) if q.zero_point.size else 0
        ref = Ref("t", self.root(t))
        size = _size(tensor.shape)
        self.launch(
            node,
            "fake_quant",
            (size,),
            ref,
            ref,
            size,
            float(q.scale[0]),
            float(zero),
            float(info.min),
            float(info.max),
        )

    # -- convolution helpers ------------------------------------------------------------------

    def conv_input(self, t: int) -> tuple[int, tuple[int, ...], int, int, int, int]:
        """(tensor to read, its NHWC shape, pad top, pad left, padded H, padded W) of a
        convolution input; a folded spatial PAD is read through (see _plan_fusion)."""
        if t in self.pad_folds:
            src, top, left, hp, wp = self.pad_folds[t]
            return src, self.tensor(src).shape, top, left, hp, wp
        shape = self.tensor(t).shape
        return t, shape, 0, 0, int(shape[1]), int(shape[2])

    def epilogue(self, node: Node) -> tuple[list[Ref], list[int]]:
        """Buffer arguments (residual, alpha, output) and int arguments (act, RC, act2, prelu)
        of the node's epilogue; absent parts point at a zero constant and are switched off."""
        ep = self.epilogues.get(node.index) or Epilogue(out=node.outputs[0], act=_act(node))
        zero = self.zeros(8)
        res = self.ref(ep.residual) if ep.residual >= 0 else zero
        alpha = zero
        if ep.alpha >= 0:
            a = ep.alpha
            alpha = self.const(
                f"a{node.index}", lambda: _pad_last(self.value(a).reshape(-1)), param=True
            )
        return [res, alpha, Ref("t", ep.out)], [ep.act, ep.channels, ep.act2, int(ep.alpha >= 0)]


def _needs_fake_quant(node: Node, tensor: Tensor) -> bool:
    q = tensor.quantization
    return not (node.op in _MOVES or tensor.dtype not in _QUANTIZED or q is None or q.per_channel)


def _size(shape: tuple[int, ...]) -> int:
    return int(math.prod(shape))


def _pad4(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    s = (1,) * (4 - len(shape)) + tuple(int(d) for d in shape)
    return s  # type: ignore[return-value]


def _act(node: Node) -> int:
    return ACTIVATIONS[node.options.get("fused_activation_function") or "NONE"]


def _window(
    node: Node, in_hw: tuple[int, int], filter_hw: tuple[int, int], folded: tuple[int, int]
) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int], tuple[int, int]]:
    """(stride, dilation, output size, padding before) of a convolution or pool, by TFLite's
    SAME / VALID rule (the core's), plus the top/left padding of a PAD folded into it."""
    stride, dilation, padding, _ = window_options(node.options)
    g = geometry(padding, in_hw, filter_hw, stride, dilation)
    return stride, dilation, (g.out_h, g.out_w), (g.pad_top + folded[0], g.pad_left + folded[1])


def _pad_last(arr: np.ndarray, multiple: int = 8) -> np.ndarray:
    extra = -arr.shape[-1] % multiple
    if extra:
        arr = np.pad(arr, [(0, 0)] * (arr.ndim - 1) + [(0, extra)])
    return arr


def _blocking(channels: int, rows: int) -> tuple[int, int]:
    """(R rows, V channel blocks of 8) per work-item for matmul/conv2d (_source.BLOCKINGS).

    6 x 16 keeps 12 accumulators, 2 weight vectors and a broadcast in 16 AVX registers; it
    wastes a block when the channel blocks are few and odd, so those take 8 x 8. Rows past the
    end are computed (clamped) and dropped, so few rows take short blocks: one row (a final
    1x1-pixel layer streaming its weights, GEMV) takes 1 x 16.
    """
    blocks = (channels + 7) // 8
    if rows == 1:
        return 1, 2
    if rows <= 4:
        return 4, 1
    if blocks >= 2 and (blocks % 2 == 0 or blocks >= 6):
        return 6, 2
    return 8, 1


# -- fusion -------------------------------------------------------------------------------

_CONVS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")
_RELUS = {"RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3}


def _plan_fusion(lw: Lowering) -> None:
    """Decide which nodes run inside another node's launch.

    * A convolution (CONV_2D, DEPTHWISE_CONV_2D with multiplier 1, FULLY_CONNECTED) absorbs the
      chain that follows it: a RELU-type op (when it has no activation of its own), a residual
      ADD of a same-shape tensor (or of a tensor zero-padded on channels by a PAD, which is
      absorbed too), a RELU-type op after the ADD, a PRELU with constant per-channel slopes.
      Each absorbed link's input must have no other reader and stay inside the partition, and
      the residual must be computed before the convolution's launch.
    * A zero PAD of H and W whose readers are all convolutions (as their input) is folded into
      their padding.

    Quantized tensors are never fused through (their fake-quantize step must run).
    """
    sg, part = lw.subgraph, lw.partition
    pos = {n: i for i, n in enumerate(part.nodes)}
    consumers = sg.consumers()
    boundary = set(part.outputs) | set(sg.outputs)

    def plain(t: int) -> bool:
        return lw.tensor(t).dtype not in _QUANTIZED

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

    def residual(other: int, add: Node, shape: tuple[int, ...], at: int) -> tuple[int, int] | None:
        producer = lw.producers.get(other)
        if producer in pos and sg.nodes[producer].op == "PAD" and sole(other) is add:
            pad = sg.nodes[producer]
            p, src = pads(pad), pad.inputs[0]
            src_shape = lw.tensor(src).shape
            if (
                p is not None
                and not p[:-1].any()
                and p[-1][0] == 0
                and tuple(src_shape[:-1]) == tuple(shape[:-1])
                and ready(src, at)
            ):
                lw.skip.add(pad.index)
                return src, int(src_shape[-1])
        if tuple(lw.tensor(other).shape) == tuple(shape) and ready(other, at):
            return other, int(shape[-1])
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
        ep = Epilogue(out=t, act=_act(node))
        fused: list[Node] = []
        nxt = sole(t)
        if nxt is not None and nxt.op in _RELUS and ep.act == 0 and plain(nxt.outputs[0]):
            ep.act, t = _RELUS[nxt.op], nxt.outputs[0]
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
            found = residual(other, nxt, shape, pos[n])
            if found is not None:
                ep.residual, ep.channels = found
                ep.act2, t = _act(nxt), nxt.outputs[0]
                fused.append(nxt)
                nxt = sole(t)
                if nxt is not None and nxt.op in _RELUS and ep.act2 == 0 and plain(nxt.outputs[0]):
                    ep.act2, t = _RELUS[nxt.op], nxt.outputs[0]
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
            if _size(alpha_shape) == shape[-1] and alpha_shape[-1] == shape[-1]:
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


# -- folding ------------------------------------------------------------------------------


def _const_float(tensor: Tensor) -> np.ndarray:
    value = tensor.constant_value()
    if tensor.dtype == np.float32:
        return value
    if tensor.dtype in (np.float16, np.float64):
        return value.astype(np.float32)
    if tensor.quantization is not None and np.issubdtype(tensor.dtype, np.integer):
        return dequantize(value, tensor.quantization)
    return value.astype(np.float32)


def foldable(subgraph: Subgraph, t: int, producers: dict[int, int] | None = None) -> bool:
    """Is tensor ``t`` a constant, or computed only from constants by DEQUANTIZE / DENSIFY?"""
    tensor = subgraph.tensors[t]
    if tensor.is_constant:
        return not tensor.is_variable and tensor.sparsity is None
    producers = subgraph.producers() if producers is None else producers
    n = producers.get(t)
    if n is None:
        return False
    node = subgraph.nodes[n]
    if node.op == "DEQUANTIZE":
        return node.inputs[0] >= 0 and foldable(subgraph, node.inputs[0], producers)
    if node.op == "DENSIFY":
        src = subgraph.tensors[node.inputs[0]]
        return src.is_constant and densify_reason(src) is None
    return False


def folded_value(subgraph: Subgraph, t: int, producers: dict[int, int] | None = None) -> np.ndarray:
    """The float view of a foldable tensor, shaped as the tensor."""
    tensor = subgraph.tensors[t]
    if tensor.is_constant:
        return _const_float(tensor)
    producers = subgraph.producers() if producers is None else producers
    node = subgraph.nodes[producers[t]]
    if node.op == "DEQUANTIZE":
        return folded_value(subgraph, node.inputs[0], producers).reshape(tensor.shape)
    src = subgraph.tensors[node.inputs[0]]
    dense = densify(src)
    if src.quantization is not None and np.issubdtype(dense.dtype, np.integer):
        return dequantize(dense, src.quantization)
    return dense.astype(np.float32)


def densify_reason(tensor: Tensor) -> str | None:
    """None if :func:`densify` can expand this sparse constant, else why not."""
    sp = tensor.sparsity
    if sp is None:
        return "input is not a sparse constant"
    if sp.block_map:
        return "block-sparse constants are not supported"
    if tuple(sp.traversal_order) != tuple(range(len(tensor.shape))):
        return "only the identity traversal order is supported"
    return None


def densify(tensor: Tensor) -> np.ndarray:
    """Expand a TACO-format sparse constant (no blocks, identity traversal) to a dense array."""
    sp = tensor.sparsity
    assert sp is not None
    values = np.frombuffer(np.asarray(tensor.data).tobytes(), dtype=tensor.dtype)
    pos = np.zeros(1, np.int64)
    coords = np.zeros((1, 0), np.int64)
    for dm in sp.dim_metadata:
        if dm.format == "DENSE":
            n = int(dm.dense_size)
            coords = np.concatenate(
                [np.repeat(coords, n, axis=0), np.tile(np.arange(n), len(pos))[:, None]], axis=1
            )
            pos = (pos[:, None] * n + np.arange(n)).ravel()
        else:
            seg = np.asarray(dm.array_segments, np.int64)
            idx = np.asarray(dm.array_indices, np.int64)
            starts, counts = seg[pos], seg[pos + 1] - seg[pos]
            owner = np.repeat(np.arange(len(pos)), counts)
            first = np.repeat(np.cumsum(counts) - counts, counts)
            k = starts[owner] + np.arange(int(counts.sum())) - first
            coords = np.concatenate([coords[owner], idx[k][:, None]], axis=1)
            pos = k
    out = np.zeros(tensor.shape, dtype=tensor.dtype)
    out[tuple(coords.T)] = values[pos]
    return out


# -- one function per op family -----------------------------------------------------------


def _conv(lw: Lowering, node: Node) -> None:
    w, b = node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else -1
    x, (n, h, wd, ci), top, left, hp, wp = lw.conv_input(node.inputs[0])
    co, kh, kw, _ = lw.tensor(w).shape
    (sh, sw), (dh, dw), (oh, ow), (pt, pl) = _window(node, (hp, wp), (kh, kw), (top, left))
    bias = lw.const(
        f"b{node.index}",
        lambda: _pad_last(lw.value(b).reshape(1, co) if b >= 0 else np.zeros((1, co), np.float32)),
        param=True,
    )
    bufs, flags = lw.epilogue(node)
    p = n * oh * ow
    r, v = _blocking(co, p)
    counts = (-(-co // (8 * v)), -(-p // r))
    if kh == kw == 1 and sh == sw == 1 and pt == pl == 0 and (oh, ow) == (h, wd):
        wt = lw.const(
            f"w{node.index}", lambda: _pad_last(lw.value(w).reshape(co, ci).T), param=True
        )
        lw.launch(
            node,
            f"matmul_{r}x{v}",
            counts,
            lw.ref(x),
            wt,
            bias,
            *bufs,
            p,
            ci,
            co,
            *flags,
            local=_BLOCKS,
        )
    else:
        wt = lw.const(
            f"w{node.index}", lambda: _pad_last(lw.value(w).transpose(1, 2, 3, 0)), param=True
        )
        lw.launch(
            node,
            f"conv2d_{r}x{v}",
            counts,
            lw.ref(x),
            wt,
            bias,
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
            local=_BLOCKS,
        )
    if node.index not in lw.epilogues:
        lw.finish(node)


def _depthwise(lw: Lowering, node: Node) -> None:
    w, b = node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else -1
    x, (n, h, wd, c), top, left, hp, wp = lw.conv_input(node.inputs[0])
    _, kh, kw, co = lw.tensor(w).shape
    (sh, sw), (dh, dw), (oh, ow), (pt, pl) = _window(node, (hp, wp), (kh, kw), (top, left))
    m = co // c

    def bias_values() -> np.ndarray:
        return lw.value(b).reshape(co) if b >= 0 else np.zeros(co, np.float32)

    if m == 1:
        wt = lw.const(
            f"w{node.index}", lambda: _pad_last(lw.value(w).reshape(kh, kw, co)), param=True
        )
        bias = lw.const(f"b{node.index}", lambda: _pad_last(bias_values()), param=True)
        bufs, flags = lw.epilogue(node)
        cb = (c + 7) // 8
        if kh == kw == 3 and sh == sw and sh in (1, 2) and dh == dw == 1:
            lw.launch(
                node,
                f"dw3x3_s{sh}",
                (cb, -(-ow // 4), n * oh),
                lw.ref(x),
                wt,
                bias,
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
                local=_ROWS,
            )
        else:
            lw.launch(
                node,
                "dwconv",
                (cb, ow, n * oh),
                lw.ref(x),
                wt,
                bias,
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
                local=_ROWS,
            )
    else:
        wt = lw.const(f"w{node.index}", lambda: lw.value(w).reshape(kh, kw, co), param=True)
        bias = lw.const(f"b{node.index}", bias_values, param=True)
        total = n * oh * ow * co
        lw.launch(
            node,
            "dwconv_any",
            (total,),
            lw.ref(x),
            wt,
            bias,
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
            _act(node),
        )
    if node.index not in lw.epilogues:
        lw.finish(node)


def _fully_connected(lw: Lowering, node: Node) -> None:
    x, w, b = node.inputs[0], node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else -1
    co, k = lw.tensor(w).shape
    p = _size(lw.tensor(x).shape) // k
    wt = lw.const(f"w{node.index}", lambda: _pad_last(lw.value(w).reshape(co, k).T), param=True)
    bias = lw.const(
        f"b{node.index}",
        lambda: _pad_last(lw.value(b).reshape(1, co) if b >= 0 else np.zeros((1, co), np.float32)),
        param=True,
    )
    bufs, flags = lw.epilogue(node)
    r, v = _blocking(co, p)
    lw.launch(
        node,
        f"matmul_{r}x{v}",
        (-(-co // (8 * v)), -(-p // r)),
        lw.ref(x),
        wt,
        bias,
        *bufs,
        p,
        k,
        co,
        *flags,
        local=_BLOCKS,
    )
    if node.index not in lw.epilogues:
        lw.finish(node)


def _transpose_conv(lw: Lowering, node: Node) -> None:
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
    bias = lw.const(
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
        bias,
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
        _act(node),
    )
    lw.finish(node)


def _pool(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    n, h, wd, c = lw.tensor(x).shape
    kh, kw = node.options.filter_height, node.options.filter_width
    (sh, sw), _, (oh, ow), (pt, pl) = _window(node, (h, wd), (kh, kw), (0, 0))
    kind = 0 if node.op == "MAX_POOL_2D" else 1
    lw.launch(
        node,
        "pool",
        ((c + 7) // 8, ow, n * oh),
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
        kind,
        _act(node),
        local=_ROWS,
    )
    lw.finish(node)


def _strides(shape: tuple[int, ...], out: tuple[int, int, int, int]) -> list[int]:
    s4 = _pad4(shape)
    strides, acc = [0, 0, 0, 0], 1
    for d in range(3, -1, -1):
        strides[d] = 0 if s4[d] == 1 and out[d] != 1 else acc
        acc *= s4[d]
    return strides


def _rows_view(shape: tuple[int, ...], total: int, last: int) -> tuple[int, int] | None:
    """(row stride, lane step) of an input of binary8 over rows of ``last`` elements: the
    whole output (step 1), one row repeated (per-channel broadcast: stride 0) or a scalar
    (step 0); None for other broadcasts."""
    size = _size(shape)
    if size == total:
        return last, 1
    if size == 1:
        return 0, 0
    if size == last and tuple(shape)[-1:] == (last,):
        return 0, 1
    return None


def _binary(lw: Lowering, node: Node) -> None:
    a, b = node.inputs[0], node.inputs[1]
    out_shape = lw.tensor(node.outputs[0]).shape
    total = _size(out_shape)
    op, act = _BINARY[node.op], _act(node)
    sa, sb = lw.tensor(a).shape, lw.tensor(b).shape
    last = int(out_shape[-1]) if out_shape else 1
    # Same shapes or scalars: the whole tensor as one row. Per-channel broadcast: rows of C.
    whole = all(_size(s) in (total, 1) for s in (sa, sb))
    row = last if not whole else total
    va, vb = _rows_view(sa, total, row), _rows_view(sb, total, row)
    if va is not None and vb is not None:
        rows = total // row
        lw.launch(
            node,
            "binary8",
            (-(-row // 8), rows),
            lw.ref(a),
            lw.ref(b),
            lw.out(node),
            rows,
            row,
            *va,
            *vb,
            op,
            act,
            local=_LANES,
        )
    else:
        o4 = _pad4(out_shape)
        lw.launch(
            node,
            "binary",
            (total,),
            lw.ref(a),
            lw.ref(b),
            lw.out(node),
            total,
            o4[1],
            o4[2],
            o4[3],
            *_strides(sa, o4),
            *_strides(sb, o4),
            op,
            act,
        )
    lw.finish(node)


def _unary(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    total = _size(lw.tensor(x).shape)
    lw.launch(node, "unary8", (-(-total // 8),), lw.ref(x), lw.out(node), total, _UNARY[node.op])
    lw.finish(node)


def _quantize(lw: Lowering, node: Node) -> None:
    x, t = node.inputs[0], node.outputs[0]
    tensor = lw.tensor(t)
    q = tensor.quantization
    assert q is not None
    info = np.iinfo(tensor.dtype)
    zero = int(q.zero_point[0]) if q.zero_point.size else 0
    total = _size(tensor.shape)
    lw.launch(
        node,
        "fake_quant",
        (total,),
        lw.ref(x),
        lw.out(node),
        total,
        float(q.scale[0]),
        float(zero),
        float(info.min),
        float(info.max),
    )


def _alias(lw: Lowering, node: Node) -> None:
    """RESHAPE, and DEQUANTIZE of a runtime tensor in the float view: same buffer, no launch."""
    x, t = node.inputs[0], node.outputs[0]
    if node.op == "DEQUANTIZE" and lw.is_folded(t):
        return  # folded at init; uploaded or returned from the host when something needs it
    if lw.is_folded(x):
        total = _size(lw.tensor(t).shape)
        lw.launch(node, "unary8", (-(-total // 8),), lw.ref(x), lw.out(node), total, _COPY)
        return
    lw.alias[t] = lw.root(x)


def _densify(lw: Lowering, node: Node) -> None:
    """DENSIFY of a constant: folded at init (like LiteRT's DensifyOperationParser)."""


def _pad(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    pads = np.asarray(lw.tensor(node.inputs[1]).constant_value(), np.int64).reshape(-1, 2)
    before = [0] * (4 - len(pads)) + [int(p) for p in pads[:, 0]]
    i4, o4 = _pad4(lw.tensor(x).shape), _pad4(lw.tensor(node.outputs[0]).shape)
    total = _size(o4)
    lw.launch(
        node, "pad", (total,), lw.ref(x), lw.out(node), total, *i4, o4[1], o4[2], o4[3], *before
    )
    lw.finish(node)


def _concatenation(lw: Lowering, node: Node) -> None:
    out_shape = lw.tensor(node.outputs[0]).shape
    axis = node.options.axis % len(out_shape)
    inner_out = _size(out_shape[axis:])
    offset = 0
    for t in node.inputs:
        shape = lw.tensor(t).shape
        inner = _size(shape[axis:])
        lw.launch(
            node,
            "copy_block",
            (_size(shape),),
            lw.ref(t),
            lw.out(node),
            _size(shape),
            inner,
            inner_out,
            offset,
        )
        offset += inner
    act = _act(node)
    if act:
        ref = lw.out(node)
        op = {1: 0, 2: 2, 3: 1, 4: 4, 5: 3}[act]
        total = _size(out_shape)
        lw.launch(node, "unary8", (-(-total // 8),), ref, ref, total, op)
    lw.finish(node)


def _lstm(lw: Lowering, node: Node) -> None:
    """The BASIC LSTM cell (op version 2) as LiteRT's GPU delegate lowers it: concat_temp =
    [input, previous activation] (two copy_block launches), activ_temp = concat_temp @ W^T + b
    (the FULLY_CONNECTED matmul, no epilogue), then lstm_gates for the activation and state.

    Like LiteRT's CPU kernel (and offload's reference), the new activation and state are also
    written into inputs 1 and 4: they are the cell's persistent state (variable tensors, or
    inputs fed back). The partition's inputs among them are read back by the kernel.
    """
    x, h, w, b, c = node.inputs
    activ, state, concat, pre = (Ref("t", t) for t in node.outputs)
    n, i = (int(d) for d in lw.tensor(x).shape)
    o = int(lw.tensor(h).shape[1])
    k, co = i + o, 4 * o
    lw.launch(node, "copy_block", (n * i,), lw.ref(x), concat, n * i, i, k, 0)
    lw.launch(node, "copy_block", (n * o,), lw.ref(h), concat, n * o, o, k, i)
    wt = lw.const(f"w{node.index}", lambda: _pad_last(lw.value(w).reshape(co, k).T), param=True)
    bias = lw.const(f"b{node.index}", lambda: _pad_last(lw.value(b).reshape(1, co)), param=True)
    zero = lw.zeros(8)
    r, v = _blocking(co, n)
    lw.launch(
        node,
        f"matmul_{r}x{v}",
        (-(-co // (8 * v)), -(-n // r)),
        concat,
        wt,
        bias,
        zero,
        zero,
        pre,
        n,
        k,
        co,
        0,
        0,
        0,
        0,
        local=_BLOCKS,
    )
    h_ref, c_ref = lw.ref(h), lw.ref(c)
    if h_ref.kind != "t" or c_ref.kind != "t":  # check_node rejects constant states
        raise ValueError("the previous activation and state must be runtime tensors")
    lw.writebacks.update(int(ref.key) for ref in (h_ref, c_ref))
    lw.launch(
        node,
        "lstm_gates",
        (-(-o // 8), n),
        pre,
        c_ref,
        activ,
        state,
        h_ref,
        c_ref,
        n,
        o,
        local=_LANES,
    )


def _resize_bilinear(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    n, h, wd, c = lw.tensor(x).shape
    _, oh, ow, _ = lw.tensor(node.outputs[0]).shape
    align = bool(node.options.get("align_corners", False))
    half = bool(node.options.get("half_pixel_centers", False))

    def scale(i: int, o: int) -> float:
        if align and o > 1:
            return float(np.float32(i - 1) / np.float32(o - 1))
        return float(np.float32(i) / np.float32(o))

    lw.launch(
        node,
        "resize_bilinear",
        ((c + 7) // 8, ow, n * oh),
        lw.ref(x),
        lw.out(node),
        h,
        wd,
        c,
        oh,
        ow,
        scale(h, oh),
        scale(wd, ow),
        int(half),
        local=_ROWS,
    )
    lw.finish(node)


def _softmax(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    shape = lw.tensor(x).shape
    c = int(shape[-1])
    rows = _size(shape) // c
    lw.launch(node, "softmax", (rows,), lw.ref(x), lw.out(node), rows, c)
    lw.finish(node)


def _slice_plan(node: Node, subgraph: Subgraph) -> tuple[int, list[int], list[int]]:
    """STRIDED_SLICE as (flat base index, extent per input dim, flat step per input dim)."""
    shape = subgraph.tensors[node.inputs[0]].shape
    begin, end, strides = (
        np.asarray(subgraph.tensors[i].constant_value()).astype(np.int64).ravel()
        for i in node.inputs[1:4]
    )
    o = node.options
    base, extents, steps = 0, [], []
    stride_in = [int(math.prod(shape[d + 1 :])) for d in range(len(shape))]
    for d, dim in enumerate(shape):
        s = int(strides[d])
        lo, hi = (0, dim) if s > 0 else (-1, dim - 1)
        if o.begin_mask >> d & 1:
            start = 0 if s > 0 else dim - 1
        else:
            start = int(begin[d]) + (dim if begin[d] < 0 else 0)
            start = min(max(start, lo), hi)
        if o.shrink_axis_mask >> d & 1:
            stop, s = start + 1, 1
        elif o.end_mask >> d & 1:
            stop = dim if s > 0 else -1
        else:
            stop = int(end[d]) + (dim if end[d] < 0 else 0)
            stop = min(max(stop, lo), hi)
        extent = max(0, -(-(stop - start) // s)) if s > 0 else max(0, -(-(start - stop) // -s))
        base += start * stride_in[d]
        extents.append(extent)
        steps.append(s * stride_in[d])
    return base, extents, steps


def _strided_slice(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    base, extents, steps = _slice_plan(node, lw.subgraph)
    extents = [1] * (4 - len(extents)) + extents
    steps = [0] * (4 - len(steps)) + steps
    total = _size(tuple(extents))
    lw.launch(
        node,
        "gather4",
        (total,),
        lw.ref(x),
        lw.out(node),
        total,
        extents[1],
        extents[2],
        extents[3],
        base,
        *steps,
    )
    lw.finish(node)


_LOWER: dict[str, Callable[[Lowering, Node], None]] = {
    "CONV_2D": _conv,
    "DEPTHWISE_CONV_2D": _depthwise,
    "FULLY_CONNECTED": _fully_connected,
    "TRANSPOSE_CONV": _transpose_conv,
    "MAX_POOL_2D": _pool,
    "AVERAGE_POOL_2D": _pool,
    **{op: _binary for op in _BINARY},
    **{op: _unary for op in ("RELU", "RELU6", "LOGISTIC", "EXP")},
    "QUANTIZE": _quantize,
    "DEQUANTIZE": _alias,
    "RESHAPE": _alias,
    "DENSIFY": _densify,
    "PAD": _pad,
    "CONCATENATION": _concatenation,
    "LSTM": _lstm,
    "RESIZE_BILINEAR": _resize_bilinear,
    "SOFTMAX": _softmax,
    "STRIDED_SLICE": _strided_slice,
}

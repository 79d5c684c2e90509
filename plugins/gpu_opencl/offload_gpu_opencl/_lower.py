"""Lowering a partition to a flat list of kernel launches, with constants pre-transformed.

Every tensor of the partition is seen through a *float view*: quantized tensors hold the real
values they stand for (``scale * (q - zero_point)``). Constants, and tensors computed from
constants only (fp16 ``DEQUANTIZE``, ``DENSIFY``), are *folded*: their values are made once here.
Pre-transformed arrays are produced through :meth:`Lowering.const`, which takes them from the
serialization cache when it has them, so a warm start never repeats the work.

Before lowering, :func:`_plan_fusion` decides which nodes need no launch of their own:
elementwise nodes that follow a convolution run in its epilogue, and zero PADs of H and W fold
into the padding of the convolutions that read them.

Nothing here trusts a shape the model declares. On PoCL device memory is the host heap, so a
kernel sized from a lying shape corrupts the process. Every op has a shape rule
(:func:`output_shapes`) that computes its outputs from its inputs and options and refuses
parameters the kernels cannot take (the delegate's support check asks it, so such nodes stay
on the CPU reference); at init every node's declared outputs must equal what its rule
computes, and every launch's index range, worked out from its arguments as the kernel in
_source computes it (:data:`_REACH`), must fit the buffers it is given. Both raise
:class:`ShapeCheckError` before anything is allocated or launched.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from offload import Node, Partition, Subgraph, Tensor
from offload.ops._conv import geometry, window_options
from offload.ops._quant import dequantize
from offload_gpu_opencl._errors import ShapeCheckError

__all__ = [
    "ACTIVATIONS",
    "SLACK",
    "Ref",
    "Launch",
    "Lowering",
    "elements",
    "foldable",
    "folded_value",
    "output_shapes",
    "shape_reason",
]

Shape = tuple[int, ...]
SLACK = 16  # elements past the end of every buffer, so 8-wide loads stay inside it
# The kernels compute indices in 32-bit int: every index they form must stay below 2**31.
INT_MAX = 2**31 - 1
MAX_ELEMENTS = INT_MAX - SLACK

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
        # Every node, fused or not: fusion and lowering read the declared shapes from here on.
        for n in self.partition.nodes:
            node = self.subgraph.nodes[n]
            try:
                check_declared(node, self.subgraph)
            except ShapeCheckError as exc:
                raise ShapeCheckError(f"{node.describe()}: {exc}") from exc
        _plan_fusion(self)
        for n in self.partition.nodes:
            if n in self.skip:
                continue
            node = self.subgraph.nodes[n]
            try:
                _LOWER[node.op](self, node)
            except Exception as exc:
                raise type(exc)(f"{node.describe()}: {exc}") from exc
        for launch in self.launches:
            self._check_reach(launch)

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
                value = int(a)  # type: ignore[call-overload]
                if not -INT_MAX - 1 <= value <= INT_MAX:
                    raise ShapeCheckError(
                        f"kernel {kernel} would get argument {value}, past the 32-bit int its "
                        "indices are computed in"
                    )
                values.append(np.int32(value))
        self.launches.append(Launch(kernel, _grid(counts, local), local, values, node.index))

    def held(self, ref: Ref) -> int:
        """Elements of the buffer behind ``ref`` before its slack: a constant's array, or
        the declared shape of the tensor (the storage the kernel allocates for it)."""
        if ref.kind == "c":
            return int(self.consts[str(ref.key)].size)
        return elements(self.tensor(int(ref.key)).shape)

    def _check_reach(self, launch: Launch) -> None:
        """Refuse a launch whose kernel would touch an element outside a buffer it is given.

        The index range of each buffer argument is worked out from the launch's arguments as
        the kernel computes it (:data:`_REACH`). 8-wide loads may run into the slack; stores
        are exact, so a written buffer gets none: a store past the tensor is wrong even where
        the allocation would hold it."""
        scalars = [a.item() for a in launch.args if not isinstance(a, Ref)]
        family = re.sub(r"_(\d+x\d+|s\d+)$", "", launch.kernel)
        refs = launch.buffers
        spans = _REACH[family](scalars, launch.global_size)
        if len(spans) != len(refs):  # a kernel signature changed without its _REACH entry
            raise ShapeCheckError(
                f"kernel {launch.kernel}: expected {len(spans)} buffer arguments, found {len(refs)}"
            )
        first_written = len(refs) - _WRITTEN.get(family, 1)
        for pos, (ref, (lo, hi)) in enumerate(zip(refs, spans)):
            if hi <= lo:
                continue  # this launch does not touch it (no residual, no PRELU)
            held = self.held(ref)
            room = held if pos >= first_written else held + SLACK
            if lo < 0 or hi > room or hi > INT_MAX:
                what = f"constant {ref.key!r}" if ref.kind == "c" else f"tensor {ref.key}"
                raise ShapeCheckError(
                    f"node {launch.node}: kernel {launch.kernel} would touch elements "
                    f"[{lo}, {hi}) of buffer argument {pos} ({what}), which holds {held}"
                    + ("" if pos >= first_written else f" (+{SLACK} slack)")
                    + "; refusing to launch it"
                )

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
        size = elements(tensor.shape)
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


def elements(shape: Iterable[int]) -> int:
    """Element count as a Python int: never a fixed-width product that wraps."""
    return math.prod(int(d) for d in shape)


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


# -- shape rules --------------------------------------------------------------------------
#
# One rule per op: the output shapes the lowering produces, computed from the node's input
# shapes, options and constant parameters. A rule raises ShapeCheckError for parameters the
# kernels cannot take; the delegate's support check turns that into a reason (the node stays
# on the CPU reference, which raises its own error where the model is invalid), and at init
# a partition whose declared output shapes differ from these is refused (check_declared).


def _need(condition: bool, message: str) -> None:
    if not condition:
        raise ShapeCheckError(message)


def _input(node: Node, sg: Subgraph, pos: int, what: str) -> Tensor:
    """A required input: present, not omitted (-1)."""
    _need(
        pos < len(node.inputs) and node.inputs[pos] >= 0,
        f"{what} (input {pos}) is "
        + ("omitted" if pos < len(node.inputs) else f"missing ({len(node.inputs)} inputs)")
        + ", but the kernel reads it",
    )
    return sg.tensors[node.inputs[pos]]


def _optional(node: Node, sg: Subgraph, pos: int) -> Tensor | None:
    present = pos < len(node.inputs) and node.inputs[pos] >= 0
    return sg.tensors[node.inputs[pos]] if present else None


def _dims(t: Tensor, rank: int, what: str) -> Shape:
    _need(len(t.shape) == rank, f"{what} must have rank {rank}, found shape {list(t.shape)}")
    return tuple(int(d) for d in t.shape)


def _nhwc(t: Tensor, what: str) -> Shape:
    _need(len(t.shape) == 4, f"{what} must be 4-D NHWC, found rank {len(t.shape)}")
    return tuple(int(d) for d in t.shape)


def _constant_ints(sg: Subgraph, t: Tensor, what: str) -> list[int]:
    _need(foldable(sg, t.index), f"{what} must be constant")
    _need(np.issubdtype(t.dtype, np.integer), f"{what} must be integers, found {t.type_name}")
    return [int(v) for v in np.asarray(t.constant_value()).ravel()]


def _bias(node: Node, sg: Subgraph, pos: int, channels: int) -> None:
    b = _optional(node, sg, pos)
    if b is not None:
        _need(
            elements(b.shape) == channels,
            f"bias (input {pos}) must hold one value per output channel ({channels}), "
            f"found shape {list(b.shape)}",
        )


def _window_shape(node: Node, in_hw: Shape, filter_hw: Shape) -> Shape:
    """(OH, OW) of a convolution or pool by TFLite's rule; refuses strides, dilations and
    filter sizes below 1, and windows that leave no output (VALID with a filter larger than
    the input: TFLite's output size would be <= 0) or overflow 32-bit indices."""
    stride, dilation, padding, _ = window_options(node.options)
    for name, pair in (("stride", stride), ("dilation", dilation), ("filter size", filter_hw)):
        _need(all(int(v) >= 1 for v in pair), f"{name} must be >= 1, found {list(pair)}")
    _need(padding in ("SAME", "VALID"), f"padding must be SAME or VALID, found {padding!r}")
    stride = (int(stride[0]), int(stride[1]))
    dilation = (int(dilation[0]), int(dilation[1]))
    for size, k, s, d in zip(in_hw, filter_hw, stride, dilation):
        span = (int(k) - 1) * d + 1
        _need(span + size + s <= INT_MAX // 4, f"a window of {span} pixels is too large")
        if padding == "VALID":
            _need(
                span <= size,
                f"a {k}-tap filter (dilation {d}) spans {span} pixels, more than the {size} of "
                "the input with VALID padding: TFLite's output size would be "
                f"{(size + s - span) // s}",
            )
    g = geometry(
        padding,
        (int(in_hw[0]), int(in_hw[1])),
        (int(filter_hw[0]), int(filter_hw[1])),
        stride,
        dilation,
    )
    return g.out_h, g.out_w


def _conv_shapes(node: Node, sg: Subgraph) -> list[Shape]:
    n, h, w, ci = _nhwc(_input(node, sg, 0, "input"), "input")
    co, kh, kw, depth = _dims(_input(node, sg, 1, "weights"), 4, "weights")
    _need(depth == ci, "grouped convolution (weights depth != input channels) is not supported")
    _bias(node, sg, 2, co)
    oh, ow = _window_shape(node, (h, w), (kh, kw))
    return [(n, oh, ow, co)]


def _depthwise_shapes(node: Node, sg: Subgraph) -> list[Shape]:
    n, h, w, c = _nhwc(_input(node, sg, 0, "input"), "input")
    one, kh, kw, co = _dims(_input(node, sg, 1, "weights"), 4, "weights")
    _need(one == 1, f"weights must be [1, KH, KW, C], found first dimension {one}")
    _need(co % c == 0, "output channels must be a multiple of input channels")
    _bias(node, sg, 2, co)
    oh, ow = _window_shape(node, (h, w), (kh, kw))
    return [(n, oh, ow, co)]


def _fully_connected_shapes(node: Node, sg: Subgraph) -> list[Shape]:
    x = _input(node, sg, 0, "input")
    co, k = _dims(_input(node, sg, 1, "weights"), 2, "weights")
    size = elements(x.shape)
    _need(
        size % k == 0,
        f"input of shape {list(x.shape)} ({size} values) does not split into rows of {k}, "
        "the weights' depth",
    )
    _bias(node, sg, 2, co)
    if node.options.get("keep_num_dims", False):
        _need(
            len(x.shape) >= 1 and x.shape[-1] == k,
            f"keep_num_dims needs the input's last dimension to be {k}, found {list(x.shape)}",
        )
        return [(*x.shape[:-1], co)]
    return [(size // k, co)]


def _transpose_conv_shapes(node: Node, sg: Subgraph) -> list[Shape]:
    out = _constant_ints(sg, _input(node, sg, 0, "output_shape"), "output_shape (input 0)")
    co, kh, kw, ci = _dims(_input(node, sg, 1, "weights"), 4, "weights")
    n, h, w, c = _nhwc(_input(node, sg, 2, "input"), "input")
    _need(len(out) == 4, f"output_shape must hold 4 values, found {out}")
    _need(c == ci, f"input channels ({c}) must equal the weights' depth ({ci})")
    _need(
        out[0] == n and out[3] == co,
        f"output_shape {out} must keep the batch ({n}) and have the weights' {co} channels",
    )
    _bias(node, sg, 3, co)
    o = node.options
    strides = [int(o.get("stride_h", 1)), int(o.get("stride_w", 1))]
    _need(min(strides) >= 1, f"stride must be >= 1, found {strides}")
    _need(o.get("padding") in ("SAME", "VALID"), "padding must be SAME or VALID")
    _need(max(out[1] + kh, out[2] + kw) * max(strides) <= INT_MAX // 4, "window too large")
    # LiteRT's check (transpose_conv.cc): the convolution this one inverts must map the
    # output back onto the input; the padding the kernel uses assumes it does.
    g = geometry(o.padding, (out[1], out[2]), (kh, kw), (strides[0], strides[1]))
    _need(
        (g.out_h, g.out_w) == (h, w),
        f"output_shape {out} does not map back onto the {h}x{w} input with stride {strides} "
        f"and {o.padding} padding (that gives {g.out_h}x{g.out_w})",
    )
    return [tuple(out)]


def _pool_shapes(node: Node, sg: Subgraph) -> list[Shape]:
    n, h, w, c = _nhwc(_input(node, sg, 0, "input"), "input")
    filt = (int(node.options.filter_height), int(node.options.filter_width))
    oh, ow = _window_shape(node, (h, w), filt)
    return [(n, oh, ow, c)]


def _binary_shapes(node: Node, sg: Subgraph) -> list[Shape]:
    _need(len(node.inputs) == 2, f"expected exactly 2 inputs, found {len(node.inputs)}")
    shapes = [_input(node, sg, pos, "operand").shape for pos in (0, 1)]
    try:
        out = tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeCheckError(f"inputs {[list(s) for s in shapes]} do not broadcast") from None
    _need(len(out) <= 4, f"broadcast result has rank {len(out)}, at most 4 supported")
    return [out]


def _same_shapes(node: Node, sg: Subgraph) -> list[Shape]:
    """Elementwise one-input ops (and QUANTIZE / DEQUANTIZE): the input's shape."""
    return [tuple(_input(node, sg, 0, "input").shape)]


def _softmax_shapes(node: Node, sg: Subgraph) -> list[Shape]:
    x = _input(node, sg, 0, "input")
    _need(len(x.shape) >= 1, "input must have at least one dimension (the softmax axis)")
    return [tuple(x.shape)]


def _reshape_shapes(node: Node, sg: Subgraph) -> list[Shape]:
    """As the CPU reference: a rank-1 int32 shape tensor wins over new_shape; with neither,
    the declared shape (TFLite's legacy rule). The lowering aliases the input's storage, so
    the element counts must agree whatever the shape."""
    x = _input(node, sg, 0, "input")
    size = elements(x.shape)
    shape_t = _optional(node, sg, 1)
    option = [int(d) for d in (node.options.get("new_shape", ()) or ())]
    has_option = bool(option)
    if shape_t is not None and (
        (len(shape_t.shape) == 1 and shape_t.dtype == np.int32) or not has_option
    ):
        target = _constant_ints(sg, shape_t, "shape (input 1)")
    elif has_option:
        target = [] if option == [0] else option  # the converter's [0] means a scalar
    else:
        target = [int(d) for d in sg.tensors[node.outputs[0]].shape]
    unknown = [i for i, d in enumerate(target) if d == -1]
    _need(
        len(unknown) <= 1 and all(d >= 1 or d == -1 for d in target),
        f"new shape {target} must have positive dimensions and at most one -1",
    )
    known = elements(d for d in target if d != -1)
    if unknown:
        _need(size % known == 0, f"{size} values do not fill new shape {target}")
        target[unknown[0]] = size // known
    _need(
        elements(target) == size,
        f"new shape {target} holds {elements(target)} values, the input {size}",
    )
    return [tuple(target)]


def _densify_shapes(node: Node, sg: Subgraph) -> list[Shape]:
    return [tuple(_input(node, sg, 0, "sparse constant").shape)]


def _pad_shapes(node: Node, sg: Subgraph) -> list[Shape]:
    x = _input(node, sg, 0, "input")
    pads = _constant_ints(sg, _input(node, sg, 1, "paddings"), "paddings (input 1)")
    rank = len(x.shape)
    _need(rank <= 4, f"input must have rank <= 4, found {rank}")
    _need(len(pads) == 2 * rank, f"paddings must be [{rank}, 2], found {len(pads)} values")
    _need(min(pads, default=0) >= 0, f"paddings must be >= 0, found {pads}")
    return [tuple(int(d) + pads[2 * i] + pads[2 * i + 1] for i, d in enumerate(x.shape))]


def _concatenation_shapes(node: Node, sg: Subgraph) -> list[Shape]:
    _need(len(node.inputs) >= 1, "expected at least one input")
    shapes = [
        tuple(int(d) for d in _input(node, sg, pos, "operand").shape)
        for pos in range(len(node.inputs))
    ]
    rank = len(shapes[0])
    axis = int(node.options.get("axis", 0))
    _need(rank >= 1, "inputs must have at least one dimension")
    _need(-rank <= axis < rank, f"axis {axis} is outside rank {rank}")
    axis %= rank
    for s in shapes:
        _need(
            len(s) == rank
            and all(a == b for d, (a, b) in enumerate(zip(s, shapes[0])) if d != axis),
            f"inputs {[list(s) for s in shapes]} differ outside axis {axis}",
        )
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return [tuple(out)]


def _lstm_shapes(node: Node, sg: Subgraph) -> list[Shape]:
    """The BASIC cell (see _lstm): x [B, I], h [B, O], W [4O, I+O], b [4O], c [B, O]."""
    b, i = _dims(_input(node, sg, 0, "input"), 2, "input")
    hb, o = _dims(_input(node, sg, 1, "previous activation"), 2, "previous activation")
    w = _dims(_input(node, sg, 2, "weights"), 2, "weights")
    bias = _input(node, sg, 3, "biases")
    c = _dims(_input(node, sg, 4, "previous state"), 2, "previous state")
    _need(hb == b and c == (b, o), f"activation and state must be [{b}, {o}]")
    _need(w == (4 * o, i + o), f"weights must be [{4 * o}, {i + o}], found {list(w)}")
    _need(elements(bias.shape) == 4 * o, f"biases must hold {4 * o} values")
    return [(b, o), (b, o), (b, i + o), (b, 4 * o)]


def _resize_shapes(node: Node, sg: Subgraph) -> list[Shape]:
    n, _, _, c = _nhwc(_input(node, sg, 0, "input"), "input")
    size = _constant_ints(sg, _input(node, sg, 1, "size"), "size (input 1)")
    _need(len(size) == 2 and min(size) >= 1, f"size must be two positive values, found {size}")
    return [(n, size[0], size[1], c)]


def _strided_slice_shapes(node: Node, sg: Subgraph) -> list[Shape]:
    return [_slice_plan(node, sg)[3]]


_SHAPES: dict[str, Callable[[Node, Subgraph], list[Shape]]] = {
    "CONV_2D": _conv_shapes,
    "DEPTHWISE_CONV_2D": _depthwise_shapes,
    "FULLY_CONNECTED": _fully_connected_shapes,
    "TRANSPOSE_CONV": _transpose_conv_shapes,
    "MAX_POOL_2D": _pool_shapes,
    "AVERAGE_POOL_2D": _pool_shapes,
    **{op: _binary_shapes for op in _BINARY},
    **{op: _same_shapes for op in ("RELU", "RELU6", "LOGISTIC", "EXP", "QUANTIZE", "DEQUANTIZE")},
    "SOFTMAX": _softmax_shapes,
    "RESHAPE": _reshape_shapes,
    "DENSIFY": _densify_shapes,
    "PAD": _pad_shapes,
    "CONCATENATION": _concatenation_shapes,
    "LSTM": _lstm_shapes,
    "RESIZE_BILINEAR": _resize_shapes,
    "STRIDED_SLICE": _strided_slice_shapes,
}


def _is_parameter(t: Tensor) -> bool:
    """An integer constant read on the host (a shape, paddings, slice bounds), not data."""
    return t.is_constant and np.issubdtype(t.dtype, np.integer) and t.quantization is None


def output_shapes(node: Node, subgraph: Subgraph) -> list[Shape]:
    """The shape of each output as the lowering computes it from the node's inputs and options.

    Raises :class:`ShapeCheckError` when the kernels cannot compute it: invalid or unsupported
    parameters, omitted inputs, empty tensors, more elements than 32-bit indices reach."""
    rule = _SHAPES.get(node.op)
    _need(rule is not None, f"gpu_opencl has no shape rule for {node.op}")
    assert rule is not None
    for pos, t in enumerate(node.inputs):
        tensor = subgraph.tensors[t] if t >= 0 else None
        if tensor is None or _is_parameter(tensor):
            continue
        _need(
            all(int(d) >= 1 for d in tensor.shape) and elements(tensor.shape) <= MAX_ELEMENTS,
            f"input {pos} has shape {list(tensor.shape)}: empty tensors and tensors of more "
            f"than {MAX_ELEMENTS} elements are not supported",
        )
    shapes = [tuple(int(d) for d in s) for s in rule(node, subgraph)]
    _need(
        len(shapes) == len(node.outputs),
        f"expected {len(shapes)} output(s), found {len(node.outputs)}",
    )
    for pos, shape in enumerate(shapes):
        _need(
            all(d >= 1 for d in shape) and elements(shape) <= MAX_ELEMENTS and len(shape) <= 4,
            f"output {pos} would have shape {list(shape)}: empty outputs, rank above 4 and more "
            f"than {MAX_ELEMENTS} elements are not supported",
        )
    return shapes


def shape_reason(node: Node, subgraph: Subgraph) -> str | None:
    """Why the lowering cannot take this node's shapes and parameters, or None."""
    try:
        output_shapes(node, subgraph)
    except ShapeCheckError as exc:
        return str(exc)
    return None


def check_declared(node: Node, subgraph: Subgraph) -> None:
    """Raise :class:`ShapeCheckError` unless every declared output shape of the node is the
    one its rule computes: buffers are sized, and kernels launched, from declared shapes."""
    shapes = output_shapes(node, subgraph)
    for pos, (t, shape) in enumerate(zip(node.outputs, shapes)):
        tensor = subgraph.tensors[t]
        if tuple(tensor.shape) != shape:
            ins = ", ".join(
                "omitted" if i < 0 else str(list(subgraph.tensors[i].shape)) for i in node.inputs
            )
            raise ShapeCheckError(
                f"output {pos} (tensor {t}, {tensor.name!r}) is declared with shape "
                f"{list(tensor.shape)}, but inputs {ins} and the node's options give "
                f"{list(shape)}; the model is inconsistent, so gpu_opencl sizes no buffer "
                "from it"
            )


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
    p = elements(lw.tensor(x).shape) // k
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
    size = elements(shape)
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
    total = elements(out_shape)
    op, act = _BINARY[node.op], _act(node)
    sa, sb = lw.tensor(a).shape, lw.tensor(b).shape
    last = int(out_shape[-1]) if out_shape else 1
    # Same shapes or scalars: the whole tensor as one row. Per-channel broadcast: rows of C.
    whole = all(elements(s) in (total, 1) for s in (sa, sb))
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
    total = elements(lw.tensor(x).shape)
    lw.launch(node, "unary8", (-(-total // 8),), lw.ref(x), lw.out(node), total, _UNARY[node.op])
    lw.finish(node)


def _quantize(lw: Lowering, node: Node) -> None:
    x, t = node.inputs[0], node.outputs[0]
    tensor = lw.tensor(t)
    q = tensor.quantization
    assert q is not None
    info = np.iinfo(tensor.dtype)
    zero = int(q.zero_point[0]) if q.zero_point.size else 0
    total = elements(tensor.shape)
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
        total = elements(lw.tensor(t).shape)
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
    total = elements(o4)
    lw.launch(
        node, "pad", (total,), lw.ref(x), lw.out(node), total, *i4, o4[1], o4[2], o4[3], *before
    )
    lw.finish(node)


def _concatenation(lw: Lowering, node: Node) -> None:
    out_shape = lw.tensor(node.outputs[0]).shape
    axis = node.options.axis % len(out_shape)
    inner_out = elements(out_shape[axis:])
    offset = 0
    for t in node.inputs:
        shape = lw.tensor(t).shape
        inner = elements(shape[axis:])
        lw.launch(
            node,
            "copy_block",
            (elements(shape),),
            lw.ref(t),
            lw.out(node),
            elements(shape),
            inner,
            inner_out,
            offset,
        )
        offset += inner
    act = _act(node)
    if act:
        ref = lw.out(node)
        op = {1: 0, 2: 2, 3: 1, 4: 4, 5: 3}[act]
        total = elements(out_shape)
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
    rows = elements(shape) // c
    lw.launch(node, "softmax", (rows,), lw.ref(x), lw.out(node), rows, c)
    lw.finish(node)


def _slice_plan(node: Node, subgraph: Subgraph) -> tuple[int, list[int], list[int], Shape]:
    """STRIDED_SLICE as (flat base index, extent per input dim, flat step per input dim, output
    shape), clamped as TFLite clamps (the CPU reference's rules). Refuses what gather4 cannot
    do (ellipsis and new-axis masks, offset) and what the CPU reference refuses (a zero stride,
    shrinking an axis at a begin clamped out of it, or with a negative stride)."""
    o = node.options
    _need(
        not (o.get("ellipsis_mask", 0) or o.get("new_axis_mask", 0) or o.get("offset", False)),
        "ellipsis_mask, new_axis_mask and offset are not supported",
    )
    shape = tuple(int(d) for d in _input(node, subgraph, 0, "input").shape)
    begin, end, strides = (
        _constant_ints(subgraph, _input(node, subgraph, pos, name), f"{name} (input {pos})")
        for pos, name in ((1, "begin"), (2, "end"), (3, "strides"))
    )
    n = len(begin)
    _need(
        len(end) == n and len(strides) == n,
        f"begin, end and strides must be as long, found {n}, {len(end)} and {len(strides)}",
    )
    _need(len(shape) <= 4, f"input must have rank <= 4, found {len(shape)}")
    _need(n <= len(shape), f"{n} slice entries for an input of rank {len(shape)}")
    begin_mask, end_mask = int(o.get("begin_mask", 0)), int(o.get("end_mask", 0))
    shrink_mask = int(o.get("shrink_axis_mask", 0))
    base, extents, steps, out = 0, [], [], []
    stride_in = [elements(shape[d + 1 :]) for d in range(len(shape))]
    for d, dim in enumerate(shape):
        if d >= n:  # past the spec: the whole axis, as the CPU reference takes it
            extents.append(dim)
            steps.append(stride_in[d])
            out.append(dim)
            continue
        s = strides[d]
        _need(s != 0, "strides must be non-zero")
        lo, hi = (0, dim) if s > 0 else (-1, dim - 1)
        if begin_mask >> d & 1:
            start = 0 if s > 0 else dim - 1
        else:
            start = min(max(begin[d] + (dim if begin[d] < 0 else 0), lo), hi)
        if shrink_mask >> d & 1:
            _need(
                0 <= start < dim and s > 0,
                f"cannot shrink axis {d} at begin {begin[d]} with stride {s} (size {dim}): "
                "LiteRT leaves this output undefined",
            )
            extent, s = 1, 1
        else:
            if end_mask >> d & 1:
                stop = dim if s > 0 else -1
            else:
                stop = min(max(end[d] + (dim if end[d] < 0 else 0), lo), hi)
            span = stop - start if s > 0 else start - stop
            extent = max(0, -(-span // abs(s)))
            out.append(extent)
        if extent:
            last = start + (extent - 1) * s
            # Clamping keeps both ends inside the axis; this is what gather4 relies on.
            _need(
                0 <= start < dim and 0 <= last < dim,
                f"axis {d}: elements {start} to {last} fall outside its {dim} entries",
            )
        base += start * stride_in[d]
        extents.append(extent)
        steps.append(s * stride_in[d])
    return base, extents, steps, tuple(out)


def _strided_slice(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    base, extents, steps, _ = _slice_plan(node, lw.subgraph)
    extents = [1] * (4 - len(extents)) + extents
    steps = [0] * (4 - len(steps)) + steps
    total = elements(tuple(extents))
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


# -- kernel reach -------------------------------------------------------------------------
#
# For each kernel family in _source: from a launch's scalar arguments (in signature order)
# and its global size, the range [lo, hi) of elements each buffer argument may be touched at,
# buffers in signature order, the written ones last (_WRITTEN counts them). These mirror the
# kernels' index arithmetic, 8-wide loads included (a buffer's slack absorbs those); a kernel
# that changes its indexing must change its entry here. Row kernels take the image count from
# the NDRange (N*OH rows, exact).

Span = tuple[int, int]
_NOTHING: Span = (0, 0)
_WRITTEN = {"lstm_gates": 4}  # buffers each family stores to, at the end of its signature


def _c8(c: int) -> int:
    return -(-c // 8) * 8


def _count(items: int, per: int) -> int:
    """How many groups of ``per`` items ``items`` reaches into (images of a row kernel)."""
    return -(-items // per) if per > 0 else 0


def _strided(base: int, dims: Sequence[int], steps: Sequence[int]) -> Span:
    """Indices base + sum(i_d * step_d) for i_d < dims[d]."""
    if min(dims) <= 0:
        return _NOTHING
    lo = base + sum(min(0, (d - 1) * s) for d, s in zip(dims, steps))
    hi = base + sum(max(0, (d - 1) * s) for d, s in zip(dims, steps))
    return lo, hi + 1


def _images_in(n: int, h: int, w: int, c: int) -> Span:
    """8-channel loads of whole pixels of n NHWC images: the last load starts at the last
    pixel's last 8-channel block."""
    return (0, (n * h * w - 1) * c + _c8(c)) if n * h * w > 0 else _NOTHING


def _reach_matmul(a: list, g: tuple[int, ...]) -> list[Span]:
    p, k, co, _act, rc, _act2, prelu = a
    c8 = _c8(co)
    return [(0, p * k), (0, k * c8), (0, c8), (0, p * rc), (0, c8 * bool(prelu)), (0, p * co)]


def _reach_conv2d(a: list, g: tuple[int, ...]) -> list[Span]:
    p, h, w, ci, oh, ow, co, kh, kw = a[:9]
    rc, prelu = a[16], a[18]
    c8, n = _c8(co), _count(p, oh * ow)
    x = (0, n * h * w * ci)
    return [
        x,
        (0, kh * kw * ci * c8),
        (0, c8),
        (0, ci),
        (0, p * rc),
        (0, c8 * bool(prelu)),
        (0, p * co),
    ]


def _reach_dw3x3(a: list, g: tuple[int, ...]) -> list[Span]:
    h, w, c, oh, ow = a[:5]
    rc, prelu = a[8], a[10]
    c8, n = _c8(c), _count(g[2], oh)
    p = n * oh * ow
    return [
        _images_in(n, h, w, c),
        (0, 9 * c8),
        (0, c8),
        (0, 8),
        (0, p * rc),
        (0, c8 * bool(prelu)),
        (0, p * c),
    ]


def _reach_dwconv(a: list, g: tuple[int, ...]) -> list[Span]:
    h, w, c, oh, ow, kh, kw = a[:7]
    rc, prelu = a[14], a[16]
    c8, n = _c8(c), _count(g[2], oh)
    p = n * oh * ow
    return [
        _images_in(n, h, w, c),
        (0, kh * kw * c8),
        (0, c8),
        (0, p * rc),
        (0, c8 * bool(prelu)),
        (0, p * c),
    ]


def _reach_dwconv_any(a: list, g: tuple[int, ...]) -> list[Span]:
    total, h, w, c, oh, ow, co, m, kh, kw = a[:10]
    _need(m >= 1, f"depth multiplier {m}")
    n = _count(total, co * ow * oh)
    x = (0, (n * h * w - 1) * c + (co - 1) // m + 1) if n * h * w > 0 else _NOTHING
    return [x, (0, kh * kw * co), (0, co), (0, total)]


def _reach_transpose_conv(a: list, g: tuple[int, ...]) -> list[Span]:
    total, h, w, ci, oh, ow, co, kh, kw, sh, sw = a[:11]
    _need(sh >= 1 and sw >= 1, f"stride {[sh, sw]}")  # the kernel takes ny % SH
    n = _count(total, co * ow * oh)
    return [(0, n * h * w * ci), (0, co * kh * kw * ci), (0, co), (0, total)]


def _reach_pool(a: list, g: tuple[int, ...]) -> list[Span]:
    h, w, c, oh, ow = a[:5]
    n = _count(g[2], oh)
    return [_images_in(n, h, w, c), (0, n * oh * ow * c)]


def _reach_binary(a: list, g: tuple[int, ...]) -> list[Span]:
    total, d1, d2, d3 = a[:4]
    dims = (_count(total, d1 * d2 * d3), d1, d2, d3)
    return [_strided(0, dims, a[4:8]), _strided(0, dims, a[8:12]), (0, total)]


def _reach_binary8(a: list, g: tuple[int, ...]) -> list[Span]:
    rows, c, ra, la, rb, lb = a[:6]

    def side(stride: int, lanes: int) -> Span:
        return _strided(0, (rows,), (stride,))[0], (rows - 1) * stride + (_c8(c) if lanes else 1)

    return [side(ra, la), side(rb, lb), (0, rows * c)]


def _reach_unary8(a: list, g: tuple[int, ...]) -> list[Span]:
    return [(0, _c8(a[0])), (0, a[0])]


def _reach_fake_quant(a: list, g: tuple[int, ...]) -> list[Span]:
    return [(0, a[0]), (0, a[0])]


def _reach_pad(a: list, g: tuple[int, ...]) -> list[Span]:
    total, i0, i1, i2, i3 = a[:5]
    return [(0, i0 * i1 * i2 * i3), (0, total)]  # reads only inside the input's extents


def _reach_copy_block(a: list, g: tuple[int, ...]) -> list[Span]:
    total, inner, inner_out, offset = a
    if total <= 0:
        return [_NOTHING, _NOTHING]
    _need(inner >= 1, f"copy_block with inner size {inner}")
    rows, rest = divmod(total - 1, inner)
    hi = rows * inner_out + offset + rest + 1
    if rows:  # the row before the last is whole
        hi = max(hi, (rows - 1) * inner_out + offset + inner)
    return [(0, total), (offset + min(0, rows * inner_out), hi)]


def _reach_gather4(a: list, g: tuple[int, ...]) -> list[Span]:
    total, d1, d2, d3, base = a[:5]
    dims = (_count(total, d1 * d2 * d3), d1, d2, d3)
    return [_strided(base, dims, a[5:9]), (0, total)]


def _last_tap(size: int, out: int, scale: float, half: int) -> int:
    """The largest top/left source index resize_bilinear takes (it clamps those only below)."""
    at = out - 1
    f = (at + 0.5) * scale - 0.5 if half else at * scale
    return max(math.floor(f), size - 1, 0)


def _reach_resize_bilinear(a: list, g: tuple[int, ...]) -> list[Span]:
    h, w, c, oh, ow, sy, sx, half = a
    n = _count(g[2], oh)
    if n <= 0:
        return [_NOTHING, _NOTHING]
    last = (n - 1) * h * w + _last_tap(h, oh, sy, half) * w + _last_tap(w, ow, sx, half)
    return [(0, last * c + _c8(c)), (0, n * oh * ow * c)]


def _reach_lstm_gates(a: list, g: tuple[int, ...]) -> list[Span]:
    b, o = a
    o8 = _c8(o)
    out = (0, b * o)
    return [(0, (b - 1) * 4 * o + 3 * o + o8), (0, (b - 1) * o + o8), out, out, out, out]


def _reach_softmax(a: list, g: tuple[int, ...]) -> list[Span]:
    rows, c = a
    return [(0, rows * c), (0, rows * c)]


_REACH: dict[str, Callable[[list, tuple[int, ...]], list[Span]]] = {
    "matmul": _reach_matmul,
    "conv2d": _reach_conv2d,
    "dw3x3": _reach_dw3x3,
    "dwconv": _reach_dwconv,
    "dwconv_any": _reach_dwconv_any,
    "transpose_conv": _reach_transpose_conv,
    "pool": _reach_pool,
    "binary": _reach_binary,
    "binary8": _reach_binary8,
    "unary8": _reach_unary8,
    "fake_quant": _reach_fake_quant,
    "pad": _reach_pad,
    "copy_block": _reach_copy_block,
    "gather4": _reach_gather4,
    "resize_bilinear": _reach_resize_bilinear,
    "lstm_gates": _reach_lstm_gates,
    "softmax": _reach_softmax,
}

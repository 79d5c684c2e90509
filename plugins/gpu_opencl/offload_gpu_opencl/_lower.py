"""Lowering a partition to a flat list of kernel launches, with constants pre-transformed.

Every tensor of the partition is seen through a *float view*: quantized tensors hold the real
values they stand for (``scale * (q - zero_point)``). Constants, and tensors computed from
constants only (fp16 ``DEQUANTIZE``, ``DENSIFY``), are *folded*: their values are made once here.
Pre-transformed arrays are produced through :meth:`Lowering.const`, which takes them from the
serialization cache when it has them, so a warm start never repeats the work.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from offload import Node, Partition, Subgraph, Tensor
from offload.ops._quant import dequantize

__all__ = ["ACTIVATIONS", "Ref", "Launch", "Lowering", "foldable", "folded_value"]

ACTIVATIONS = {"NONE": 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3, "TANH": 4, "SIGMOID": 5}
_BINARY = {"ADD": 0, "SUB": 1, "MUL": 2, "MAXIMUM": 3, "MINIMUM": 4, "PRELU": 5, "LOGICAL_AND": 6}
_UNARY = {"RELU": 0, "RELU6": 1, "RELU_N1_TO_1": 2, "LOGISTIC": 3, "TANH": 4, "EXP": 5}
_FAKE_QUANT = 7
_COPY = 6
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
    """One kernel enqueue: function name, work-items and arguments in signature order."""

    kernel: str
    total: int
    args: list[Ref | np.int32 | np.float32]
    node: int

    @property
    def buffers(self) -> list[Ref]:
        """Buffer arguments: inputs first, the written buffer last."""
        return [a for a in self.args if isinstance(a, Ref)]


@dataclass
class Lowering:
    subgraph: Subgraph
    partition: Partition
    cached: dict[str, np.ndarray] = field(default_factory=dict)
    launches: list[Launch] = field(default_factory=list)
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    alias: dict[int, int] = field(default_factory=dict)
    writes: dict[int, list[int]] = field(default_factory=dict)  # tensor -> launches writing it
    misses: int = 0

    def __post_init__(self) -> None:
        self.producers = self.subgraph.producers()
        for n in self.partition.nodes:
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

    def const(self, name: str, make: Callable[[], np.ndarray]) -> Ref:
        """A pre-transformed constant: from the cache if present, else made now (float32)."""
        if name not in self.consts:
            arr = self.cached.get(name)
            if arr is None:
                self.misses += 1
                arr = np.ascontiguousarray(make(), dtype=np.float32)
            self.consts[name] = arr
        return Ref("c", name)

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

    def launch(self, node: Node, kernel: str, total: int, *args: object) -> None:
        values: list[Ref | np.int32 | np.float32] = []
        for a in args:
            if isinstance(a, Ref):
                values.append(a)
            elif isinstance(a, float):
                values.append(np.float32(a))
            else:
                values.append(np.int32(a))
        values.insert(_n_buffers(values), np.int32(total))
        self.launches.append(Launch(kernel, int(total), values, node.index))

    def finish(self, node: Node) -> None:
        """After a node: fake-quantize a quantized output so it holds representable values."""
        t = node.outputs[0]
        tensor = self.tensor(t)
        q = tensor.quantization
        if node.op in _MOVES or tensor.dtype not in _QUANTIZED or q is None or q.per_channel:
            return
        info = np.iinfo(tensor.dtype)
        zero = int(q.zero_point[0]) if q.zero_point.size else 0
        ref = Ref("t", self.root(t))
        self.launch(node, "unary", _size(tensor.shape), ref, ref, _FAKE_QUANT,
                    float(q.scale[0]), float(zero), float(info.min), float(info.max))


def _n_buffers(values: list) -> int:
    n = 0
    while n < len(values) and isinstance(values[n], Ref):
        n += 1
    return n


def _size(shape: tuple[int, ...]) -> int:
    return int(math.prod(shape))


def _pad4(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    s = (1,) * (4 - len(shape)) + tuple(int(d) for d in shape)
    return s  # type: ignore[return-value]


def _act(node: Node) -> int:
    return ACTIVATIONS[node.options.get("fused_activation_function") or "NONE"]


def _padding(padding: str, size: int, k: int, stride: int, dilation: int) -> tuple[int, int]:
    """(output size, padding before) with TFLite's SAME / VALID rules."""
    eff = (k - 1) * dilation + 1
    if padding == "SAME":
        out = (size + stride - 1) // stride
        total = max((out - 1) * stride + eff - size, 0)
        return out, total // 2
    return (size - eff + stride) // stride, 0


def _pad_last(arr: np.ndarray, multiple: int = 8) -> np.ndarray:
    extra = -arr.shape[-1] % multiple
    if extra:
        arr = np.pad(arr, [(0, 0)] * (arr.ndim - 1) + [(0, extra)])
    return arr


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
    x, w, b = node.inputs[0], node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else -1
    n, h, wd, ci = lw.tensor(x).shape
    co, kh, kw, _ = lw.tensor(w).shape
    o = node.options
    sh, sw = o.stride_h, o.stride_w
    dh, dw = o.get("dilation_h_factor", 1), o.get("dilation_w_factor", 1)
    oh, pt = _padding(o.padding, h, kh, sh, dh)
    ow, pl = _padding(o.padding, wd, kw, sw, dw)
    bias = lw.const(f"b{node.index}", lambda: _pad_last(
        lw.value(b).reshape(1, co) if b >= 0 else np.zeros((1, co), np.float32)))
    cb = (co + 7) // 8
    if kh == kw == 1 and sh == sw == 1 and pt == pl == 0:
        wt = lw.const(f"w{node.index}", lambda: _pad_last(lw.value(w).reshape(co, ci).T))
        p = n * h * wd
        lw.launch(node, "matmul", cb * ((p + 3) // 4), lw.ref(x), wt, bias, lw.out(node),
                  p, ci, co, _act(node))
    else:
        wt = lw.const(f"w{node.index}", lambda: _pad_last(lw.value(w).transpose(1, 2, 3, 0)))
        p = n * oh * ow
        lw.launch(node, "conv2d", cb * ((p + 3) // 4), lw.ref(x), wt, bias, lw.out(node),
                  p, h, wd, ci, oh, ow, co, kh, kw, sh, sw, dh, dw, pt, pl, _act(node))
    lw.finish(node)


def _depthwise(lw: Lowering, node: Node) -> None:
    x, w, b = node.inputs[0], node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else -1
    n, h, wd, c = lw.tensor(x).shape
    _, kh, kw, co = lw.tensor(w).shape
    o = node.options
    sh, sw = o.stride_h, o.stride_w
    dh, dw = o.get("dilation_h_factor", 1), o.get("dilation_w_factor", 1)
    oh, pt = _padding(o.padding, h, kh, sh, dh)
    ow, pl = _padding(o.padding, wd, kw, sw, dw)
    m = co // c

    def bias_values() -> np.ndarray:
        return lw.value(b).reshape(co) if b >= 0 else np.zeros(co, np.float32)

    if m == 1:
        wt = lw.const(f"w{node.index}", lambda: _pad_last(lw.value(w).reshape(kh, kw, co)))
        bias = lw.const(f"b{node.index}", lambda: _pad_last(bias_values()))
        cb = (c + 7) // 8
        lw.launch(node, "dwconv", cb * n * oh * ow, lw.ref(x), wt, bias, lw.out(node),
                  h, wd, c, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, _act(node))
    else:
        wt = lw.const(f"w{node.index}", lambda: lw.value(w).reshape(kh, kw, co))
        bias = lw.const(f"b{node.index}", bias_values)
        lw.launch(node, "dwconv_any", n * oh * ow * co, lw.ref(x), wt, bias, lw.out(node),
                  h, wd, c, oh, ow, co, m, kh, kw, sh, sw, dh, dw, pt, pl, _act(node))
    lw.finish(node)


def _fully_connected(lw: Lowering, node: Node) -> None:
    x, w, b = node.inputs[0], node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else -1
    co, k = lw.tensor(w).shape
    p = _size(lw.tensor(x).shape) // k
    wt = lw.const(f"w{node.index}", lambda: _pad_last(lw.value(w).reshape(co, k).T))
    bias = lw.const(f"b{node.index}", lambda: _pad_last(
        lw.value(b).reshape(1, co) if b >= 0 else np.zeros((1, co), np.float32)))
    lw.launch(node, "matmul", (co + 7) // 8 * ((p + 3) // 4), lw.ref(x), wt, bias, lw.out(node),
              p, k, co, _act(node))
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
    wt = lw.const(f"w{node.index}", lambda: lw.value(w))
    bias = lw.const(f"b{node.index}", lambda: (
        lw.value(b).reshape(co) if b >= 0 else np.zeros(co, np.float32)))
    lw.launch(node, "transpose_conv", n * oh * ow * co, lw.ref(x), wt, bias, lw.out(node),
              h, wd, ci, oh, ow, co, kh, kw, sh, sw, pt, pl, _act(node))
    lw.finish(node)


def _pool(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    n, h, wd, c = lw.tensor(x).shape
    o = node.options
    kh, kw, sh, sw = o.filter_height, o.filter_width, o.stride_h, o.stride_w
    oh, pt = _padding(o.padding, h, kh, sh, 1)
    ow, pl = _padding(o.padding, wd, kw, sw, 1)
    kind = 0 if node.op == "MAX_POOL_2D" else 1
    lw.launch(node, "pool", n * oh * ow * c, lw.ref(x), lw.out(node),
              h, wd, c, oh, ow, kh, kw, sh, sw, pt, pl, kind, _act(node))
    lw.finish(node)


def _strides(shape: tuple[int, ...], out: tuple[int, int, int, int]) -> list[int]:
    s4 = _pad4(shape)
    strides, acc = [0, 0, 0, 0], 1
    for d in range(3, -1, -1):
        strides[d] = 0 if s4[d] == 1 and out[d] != 1 else acc
        acc *= s4[d]
    return strides


def _binary(lw: Lowering, node: Node) -> None:
    a, b = node.inputs[0], node.inputs[1]
    out_shape = lw.tensor(node.outputs[0]).shape
    total = _size(out_shape)
    op, act = _BINARY[node.op], _act(node)
    sa, sb = lw.tensor(a).shape, lw.tensor(b).shape
    if _size(sa) == total and _size(sb) == total:
        lw.launch(node, "binary_same", total, lw.ref(a), lw.ref(b), lw.out(node), op, act)
    else:
        o4 = _pad4(out_shape)
        lw.launch(node, "binary", total, lw.ref(a), lw.ref(b), lw.out(node), o4[1], o4[2],
                  o4[3], *_strides(sa, o4), *_strides(sb, o4), op, act)
    lw.finish(node)


def _unary(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    lw.launch(node, "unary", _size(lw.tensor(x).shape), lw.ref(x), lw.out(node),
              _UNARY[node.op], 0.0, 0.0, 0.0, 0.0)
    lw.finish(node)


def _quantize(lw: Lowering, node: Node) -> None:
    x, t = node.inputs[0], node.outputs[0]
    tensor = lw.tensor(t)
    q = tensor.quantization
    assert q is not None
    info = np.iinfo(tensor.dtype)
    zero = int(q.zero_point[0]) if q.zero_point.size else 0
    lw.launch(node, "unary", _size(tensor.shape), lw.ref(x), lw.out(node), _FAKE_QUANT,
              float(q.scale[0]), float(zero), float(info.min), float(info.max))


def _alias(lw: Lowering, node: Node) -> None:
    """RESHAPE, and DEQUANTIZE of a runtime tensor in the float view: same buffer, no launch."""
    x, t = node.inputs[0], node.outputs[0]
    if node.op == "DEQUANTIZE" and lw.is_folded(t):
        return  # folded at init; uploaded or returned from the host when something needs it
    if lw.is_folded(x):
        lw.launch(node, "unary", _size(lw.tensor(t).shape), lw.ref(x), lw.out(node), _COPY,
                  0.0, 0.0, 0.0, 0.0)
        return
    lw.alias[t] = lw.root(x)


def _densify(lw: Lowering, node: Node) -> None:
    """DENSIFY of a constant: folded at init (like LiteRT's DensifyOperationParser)."""


def _pad(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    pads = np.asarray(lw.tensor(node.inputs[1]).constant_value(), np.int64).reshape(-1, 2)
    before = [0] * (4 - len(pads)) + [int(p) for p in pads[:, 0]]
    i4, o4 = _pad4(lw.tensor(x).shape), _pad4(lw.tensor(node.outputs[0]).shape)
    lw.launch(node, "pad", _size(o4), lw.ref(x), lw.out(node), *i4, o4[1], o4[2], o4[3], *before)
    lw.finish(node)


def _concatenation(lw: Lowering, node: Node) -> None:
    out_shape = lw.tensor(node.outputs[0]).shape
    axis = node.options.axis % len(out_shape)
    inner_out = _size(out_shape[axis:])
    offset = 0
    for t in node.inputs:
        shape = lw.tensor(t).shape
        inner = _size(shape[axis:])
        lw.launch(node, "copy_block", _size(shape), lw.ref(t), lw.out(node), inner, inner_out,
                  offset)
        offset += inner
    act = _act(node)
    if act:
        ref = lw.out(node)
        op = {1: 0, 2: 2, 3: 1, 4: 4, 5: 3}[act]
        lw.launch(node, "unary", _size(out_shape), ref, ref, op, 0.0, 0.0, 0.0, 0.0)
    lw.finish(node)


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

    lw.launch(node, "resize_bilinear", n * oh * ow * c, lw.ref(x), lw.out(node),
              h, wd, c, oh, ow, scale(h, oh), scale(wd, ow), int(half))
    lw.finish(node)


def _softmax(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    shape = lw.tensor(x).shape
    c = int(shape[-1])
    lw.launch(node, "softmax", _size(shape) // c, lw.ref(x), lw.out(node), c)
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
    lw.launch(node, "gather4", _size(tuple(extents)), lw.ref(x), lw.out(node),
              extents[1], extents[2], extents[3], base, *steps)
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
    "RESIZE_BILINEAR": _resize_bilinear,
    "SOFTMAX": _softmax,
    "STRIDED_SLICE": _strided_slice,
}

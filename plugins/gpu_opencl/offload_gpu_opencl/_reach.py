"""Kernel reach: the elements each launch may touch, checked against the buffers it is given.

For each kernel in cl/ (by function name, blocking suffix dropped): from a launch's scalar
arguments (in signature order) and its global size, the range [lo, hi) of elements each buffer
argument may be touched at, buffers in signature order, the written ones last (_WRITTEN counts
them). These mirror the kernels' index arithmetic, 8-wide loads included (a buffer's slack
absorbs those); a kernel that changes its indexing must change its entry here. Row kernels
take the image count from the NDRange (N*OH rows, exact).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from offload_gpu_opencl._errors import ShapeCheckError
from offload_gpu_opencl._ir import INT_MAX, SLACK, Launch, Lowering, Ref
from offload_gpu_opencl._shapes import need

__all__ = ["check_reach", "register_reach"]

Span = tuple[int, int]
_NOTHING: Span = (0, 0)
# Buffers each kernel stores to, at the end of its signature (1 where not listed).
_WRITTEN = {"lstm_gates": 4, "se_gate": 3}


def check_reach(lw: Lowering, launch: Launch) -> None:
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
        held = lw.held(ref)
        room = held if pos >= first_written else held + SLACK
        if lo < 0 or hi > room or hi > INT_MAX:
            what = f"constant {ref.key!r}" if ref.kind == "c" else f"tensor {ref.key}"
            raise ShapeCheckError(
                f"node {launch.node}: kernel {launch.kernel} would touch elements "
                f"[{lo}, {hi}) of buffer argument {pos} ({what}), which holds {held}"
                + ("" if pos >= first_written else f" (+{SLACK} slack)")
                + "; refusing to launch it"
            )


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
    need(m >= 1, f"depth multiplier {m}")
    n = _count(total, co * ow * oh)
    x = (0, (n * h * w - 1) * c + (co - 1) // m + 1) if n * h * w > 0 else _NOTHING
    return [x, (0, kh * kw * co), (0, co), (0, total)]


def _reach_transpose_conv(a: list, g: tuple[int, ...]) -> list[Span]:
    total, h, w, ci, oh, ow, co, kh, kw, sh, sw = a[:11]
    need(sh >= 1 and sw >= 1, f"stride {[sh, sw]}")  # the kernel takes ny % SH
    n = _count(total, co * ow * oh)
    return [(0, n * h * w * ci), (0, co * kh * kw * ci), (0, co), (0, total)]


def _reach_pool(a: list, g: tuple[int, ...]) -> list[Span]:
    h, w, c, oh, ow = a[:5]
    n = _count(g[2], oh)
    return [_images_in(n, h, w, c), (0, n * oh * ow * c)]


def _reach_mean_hw(a: list, g: tuple[int, ...]) -> list[Span]:
    hw, c = a[:2]
    n = g[1]
    return [_images_in(n, hw, 1, c), (0, n * c)]


def _reach_se_gate(a: list, g: tuple[int, ...]) -> list[Span]:
    # The mean as mean_hw reads it, two products (weights [K][Co8], bias, residual, PRELU
    # slopes), then the stored mean, first product and gate: one row per image.
    hw, c, _, s, _, rc1, _, prelu1, c2, _, rc2, _, prelu2 = a
    n = g[1]

    def product(k: int, co: int, rc: int, prelu: int) -> list[Span]:
        return [(0, k * _c8(co)), (0, _c8(co)), (0, n * rc), (0, co * bool(prelu))]

    return [
        _images_in(n, hw, 1, c),
        *product(c, s, rc1, prelu1),
        *product(s, c2, rc2, prelu2),
        (0, n * c),
        (0, n * s),
        (0, n * c2),
    ]


def _reach_depth_to_space(a: list, g: tuple[int, ...]) -> list[Span]:
    oh, ow, co, bs = a
    n = _count(g[2], oh)
    # The last load: the last input pixel's last block of Co channels, 8 wide.
    pixels = n * (oh // bs) * (ow // bs)
    return [(0, pixels * co * bs * bs - co + _c8(co)), (0, n * oh * ow * co)]


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
    need(inner >= 1, f"copy_block with inner size {inner}")
    rows, rest = divmod(total - 1, inner)
    hi = rows * inner_out + offset + rest + 1
    if rows:  # the row before the last is whole
        hi = max(hi, (rows - 1) * inner_out + offset + inner)
    return [(0, total), (offset + min(0, rows * inner_out), hi)]


def _reach_gather4(a: list, g: tuple[int, ...]) -> list[Span]:
    total, d1, d2, d3, base = a[:5]
    dims = (_count(total, d1 * d2 * d3), d1, d2, d3)
    return [_strided(base, dims, a[5:9]), (0, total)]


def _last_tap(size: int, out: int, scale: float, mode: int) -> int:
    """The largest top/left source index resize_bilinear takes (it clamps those only below;
    the 2x mode takes (out - 1) // 2, clamping its second tap)."""
    at = out - 1
    if mode == 2:
        return max(at >> 1, size - 1, 0)
    f = (at + 0.5) * scale - 0.5 if mode else at * scale
    return max(math.floor(f), size - 1, 0)


def _reach_resize_bilinear(a: list, g: tuple[int, ...]) -> list[Span]:
    h, w, c, oh, ow, sy, sx, mode = a
    n = _count(g[2], oh)
    if n <= 0:
        return [_NOTHING, _NOTHING]
    last = (n - 1) * h * w + _last_tap(h, oh, sy, mode) * w + _last_tap(w, ow, sx, mode)
    return [(0, last * c + _c8(c)), (0, n * oh * ow * c)]


def _reach_lstm_gates(a: list, g: tuple[int, ...]) -> list[Span]:
    b, o = a
    o8 = _c8(o)
    out = (0, b * o)
    return [(0, (b - 1) * 4 * o + 3 * o + o8), (0, (b - 1) * o + o8), out, out, out, out]


def _reach_to_store(a: list, g: tuple[int, ...]) -> list[Span]:
    # Launched by the kernel itself (half-storage inputs), sized from the input it converts.
    (total,) = a
    return [(0, total), (0, total)]


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
    "mean_hw": _reach_mean_hw,
    "se_gate": _reach_se_gate,
    "depth_to_space": _reach_depth_to_space,
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
    "softmax_rows": _reach_softmax,
    "to_store": _reach_to_store,
}


def register_reach(
    kernel: str, rule: Callable[[list, tuple[int, ...]], list[Span]], written: int = 1
) -> None:
    """Add the reach rule of a kernel family lowered outside this module (the tiled GEMMs), so
    a family's rule stays beside its lowering; ``written``: buffers it stores to, at the end of
    its signature."""
    _REACH[kernel] = rule
    if written != 1:
        _WRITTEN[kernel] = written

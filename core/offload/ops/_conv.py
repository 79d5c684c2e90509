"""Shared machinery of the convolution family (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED,
TRANSPOSE_CONV, BATCH_MATMUL): patch extraction, weight preparation, requantization multipliers
and the on-the-fly input quantization of the hybrid kernels. The padding rule itself is the
public :mod:`offload.geometry`, shared with delegates.

Integer dot products are computed as float GEMMs: every int8/int16 product and every partial
sum stays far below 2**53, so a float64 result is exact and BLAS-fast, unlike numpy's integer
matmul; float32 is exact too while every partial sum stays below 2**24, which setup checks
against the actual weights (:func:`gemm_dtype`). The int8 kernels then requantize in float64
where that is provably exact (:class:`RuyRequantizer`) instead of in int64 passes.
"""

from __future__ import annotations

import functools
import math
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from offload.geometry import Geometry
from offload.ops._base import ShapeContext, check_shape
from offload.ops._quant import (
    activation_range_quantized,
    dtype_range,
    multiply_by_quantized_multiplier,
    quantize_rows,  # noqa: F401  (re-exported)
    scale_zp,
)
from offload.quant import (
    channel_scales,
    conv_multipliers,
    multiply_by_quantized_multiplier_half_up,
    multiply_by_quantized_multiplier_int64,
    multiply_by_real_multiplier,
)

if TYPE_CHECKING:
    from offload._graph import Quantization, Subgraph, Tensor
    from offload.ops._base import OpKernel

__all__ = [
    "pad_spatial",
    "patches",
    "im2col",
    "patch_columns",
    "weight_value",
    "unpack_int4",
    "output_multipliers",
    "real_multipliers",
    "requantize_wide",
    "requantize_ruy",
    "requantize_real",
    "Rounding",
    "finish_quantized",
    "quantize_rows",
    "exact_matmul",
    "scale_zp",
    "gemm_dtype",
    "float32_k_splits",
    "IntegerGemm",
    "eigen_depth_blocks",
    "eigen_order_dots",
    "float_order_matters",
    "eigen_order_gemv",
    "eigen_order_matmul",
    "RuyRequantizer",
    "REQUANTIZE_BYTES",
    "activation_scratch",
    "scratch",
    "ROWS_PER_CHUNK_ELEMENTS",
]


def pad_spatial(x: np.ndarray, g: Geometry, value: float = 0) -> np.ndarray:
    """Pad an NHWC array on H and W with ``value`` (the zero point for quantized inputs)."""
    if not (g.pad_top or g.pad_bottom or g.pad_left or g.pad_right):
        return x
    n, h, w, c = x.shape
    out = np.full(
        (n, h + g.pad_top + g.pad_bottom, w + g.pad_left + g.pad_right, c), value, dtype=x.dtype
    )
    out[:, g.pad_top : g.pad_top + h, g.pad_left : g.pad_left + w] = x
    return out


def patches(
    padded: np.ndarray,
    g: Geometry,
    filter_hw: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int] = (1, 1),
) -> np.ndarray:
    """A read-only (N, OH, OW, KH, KW, C) view of the windows of a padded NHWC array."""
    sn, sh, sw, sc = padded.strides
    shape = (padded.shape[0], g.out_h, g.out_w, filter_hw[0], filter_hw[1], padded.shape[3])
    strides = (sn, sh * stride[0], sw * stride[1], sh * dilation[0], sw * dilation[1], sc)
    return np.lib.stride_tricks.as_strided(padded, shape, strides, writeable=False)


# Below this many input channels im2col gathers its patch matrix transposed: a copy of runs of
# C values is slow when C is small (12 ns a row of 27 values for a 3-channel 3x3 window),
# while the transposed copy runs along output pixels.
TRANSPOSED_GATHER_MAX_CHANNELS = 8


def im2col(
    x: np.ndarray,
    g: Geometry,
    filter_hw: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int] = (1, 1),
    pad_value: float = 0,
) -> np.ndarray:
    """The (N*OH*OW, KH*KW*C) patch matrix, rows in output order, columns in OHWI filter order
    (a transposed view of :func:`patch_columns` for inputs with few channels: BLAS reads
    either layout)."""
    n, _, _, c = x.shape
    if filter_hw == (1, 1) and stride == (1, 1) and (g.out_h, g.out_w) == x.shape[1:3]:
        return x.reshape(-1, c)  # a 1x1 stride-1 convolution is a plain GEMM on the input
    if c <= TRANSPOSED_GATHER_MAX_CHANNELS:
        return patch_columns(x, g, filter_hw, stride, dilation, pad_value).T
    view = patches(pad_spatial(x, g, pad_value), g, filter_hw, stride, dilation)
    return view.reshape(n * g.out_h * g.out_w, filter_hw[0] * filter_hw[1] * c)


def patch_columns(
    x: np.ndarray,
    g: Geometry,
    filter_hw: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int] = (1, 1),
    pad_value: float = 0,
    dtype: np.dtype | type | None = None,
) -> np.ndarray:
    """The transposed patch matrix (KH*KW*C, N*OH*OW), C-contiguous, of ``dtype`` (default
    the input's), copied from the windows in one pass along output pixels."""
    view = patches(pad_spatial(x, g, pad_value), g, filter_hw, stride, dilation)
    n, oh, ow, kh, kw, c = view.shape
    columns = np.empty((kh, kw, c, n, oh, ow), dtype or x.dtype)
    np.copyto(columns, view.transpose(3, 4, 5, 0, 1, 2), casting="unsafe")
    return columns.reshape(kh * kw * c, n * oh * ow)


def unpack_int4(packed: np.ndarray, count: int) -> np.ndarray:
    """TFLite's packed INT4 storage: two values a byte, low nibble first, sign-extended."""
    raw = np.asarray(packed, np.uint8).ravel()
    low = (raw & 0x0F).astype(np.int8)
    high = (raw >> 4).astype(np.int8)
    both = np.stack([low, high], axis=1).ravel()[:count]
    return np.where(both > 7, both - 16, both).astype(np.int8)


def weight_value(kernel: OpKernel, position: int) -> np.ndarray | None:
    """The constant at input ``position`` shaped as its tensor (INT4 unpacked), else None."""
    tensor = kernel.inputs[position] if position < len(kernel.inputs) else None
    if tensor is not None and tensor.type_name == "INT4" and tensor.data is not None:
        return unpack_int4(tensor.data, int(np.prod(tensor.shape))).reshape(tensor.shape)
    return kernel.constant(position)


def real_multipliers(
    input_scale: float, filter_q: Quantization, output_scale: float, channels: int
) -> np.ndarray:
    """input_scale * filter_scale / output_scale per channel, in double."""
    scales = channel_scales(filter_q, channels).astype(np.float64)
    return np.float64(np.float32(input_scale)) * scales / np.float64(np.float32(output_scale))


def output_multipliers(
    input_scale: float,
    filter_q: Quantization,
    output_scale: float,
    channels: int,
    float_product: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (multiplier, shift): :func:`offload.quant.conv_multipliers`."""
    return conv_multipliers(
        input_scale, filter_q, output_scale, channels, float_product=float_product
    )


# The requantization rules themselves live in the public offload.quant, shared with delegates.
requantize_wide = multiply_by_quantized_multiplier_int64
requantize_ruy = multiply_by_quantized_multiplier_half_up
requantize_real = multiply_by_real_multiplier


Rounding = Literal["double", "ruy", "wide", "real"]

# Each kernel's rule, from offload.quant (see its table of rules per op family).
_REQUANTIZE: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]] = {
    "double": multiply_by_quantized_multiplier,
    "ruy": multiply_by_quantized_multiplier_half_up,
    "wide": multiply_by_quantized_multiplier_int64,
    "real": multiply_by_real_multiplier,
}


def activation_scratch(activation: str | None, elements: int) -> int:
    """Bytes of the float32 arrays :func:`~offload.ops._activation.apply_fused_activation`
    makes for ``elements`` values at its peak: none where it clamps in place."""
    per_element = {"TANH": 4, "SIGN_BIT": 5, "SIGMOID": 12}.get(activation or "NONE", 0)
    return per_element * elements


# Bytes of int64 temporaries finish_quantized holds at its peak per element (57 with the
# reference rounding's several passes): what a scratch rule counts per requantized sum.
REQUANTIZE_BYTES = 64


def finish_quantized(
    acc: np.ndarray,
    multiplier: np.ndarray,
    shift: np.ndarray,
    output: Tensor,
    activation: str | None,
    rounding: Rounding = "double",
) -> np.ndarray:
    """Accumulator -> output integers: scale, add the output zero point, clamp to the fused
    activation's range. ``rounding`` names the multiplier arithmetic of the kernel LiteRT runs:
    "double" (TFLite's reference), "ruy" (LiteRT's GEMM kernels), "wide" (int64 accumulators),
    "real" (then ``multiplier`` holds the float64 real scales and ``shift`` is unused)."""
    _, zero_point = scale_zp(output)
    if output.quantization is None:
        lo, hi = dtype_range(output.dtype)
    else:
        lo, hi = activation_range_quantized(activation or "NONE", output.quantization, output.dtype)
    scaled = _REQUANTIZE[rounding](acc, multiplier, shift)
    return np.clip(scaled + zero_point, lo, hi).astype(output.dtype)


def exact_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact integer matmul of small-integer arrays (held as float64), returned as int64."""
    return np.rint(np.matmul(a, b)).astype(np.int64)


Kind = Literal["float", "hybrid", "quantized"]


def kind_of(input_tensor: Tensor, filter_tensor: Tensor | None) -> Kind:
    """Which arithmetic LiteRT picks: float, hybrid (float input with integer weights that are
    quantized on the fly), or fully quantized."""
    if input_tensor.dtype == np.float32:
        if filter_tensor is not None and filter_tensor.type_name in ("INT8", "UINT8", "INT4"):
            return "hybrid"
        return "float"
    return "quantized"


def bias_is_wide(bias: Tensor | None, quantized_bias_type: int) -> bool:
    """Whether a 16x8 kernel accumulates in int64: an int64 bias, or no bias and no request
    for int32 (TensorType INT32 == 2) in the options."""
    if bias is not None:
        return bias.dtype == np.int64
    return quantized_bias_type not in (2, "INT32")


def filter_zero_point(t: Tensor) -> np.ndarray | int:
    """The filter's zero point (nonzero only for uint8 filters)."""
    q = t.quantization
    if q is None or q.zero_point.size == 0:
        return 0
    return int(q.zero_point[0]) if q.zero_point.size == 1 else q.zero_point.astype(np.int64)


def filter_scales(t: Tensor, channels: int) -> np.ndarray:
    """The filter's scales as float32, one per output channel."""
    return channel_scales(t, channels)


def check_bias(ctx: ShapeContext, out_channels: int) -> None:
    """A conv's optional bias (input 2) must hold one value per output channel."""
    if ctx.has(2):
        bias = math.prod(ctx.shape(2))
        check_shape(
            bias == out_channels,
            f"expected {out_channels} bias values (one per out-channel), found {bias}",
        )


# --- the exact float path of the int8 GEMM kernels ------------------------------------------

# Integers of magnitude below these are exact in float32 / float64.
_F32_EXACT = 1 << 24
_F64_EXACT = 1 << 53

# The integer kernels work through their rows in chunks of about this many elements, so that
# patch rows, GEMM results and requantization temporaries stay in cache and are reused
# rather than allocated (and page-faulted) per run.
ROWS_PER_CHUNK_ELEMENTS = 1 << 18

_local = threading.local()


def scratch(name: str, size: int, dtype: type) -> np.ndarray:
    """A flat per-thread work array of at least ``size`` elements, reused across kernels and
    runs (each kernel finishes with it before the next one runs on the same thread)."""
    store: dict[tuple[str, type], np.ndarray] = _local.__dict__.setdefault("arrays", {})
    buf = store.get((name, dtype))
    if buf is None or buf.size < size:
        buf = store[(name, dtype)] = np.empty(max(size, 1), dtype)
    return buf[:size]


def gemm_dtype(input_dtype: np.dtype | type, weights: np.ndarray) -> type | None:
    """The float type in which (integer input) @ ``weights`` (K, N) is exact whatever order
    BLAS sums in: float32 while |x| * sum_k |w[k, n]| < 2**24 for every column, bounding every
    partial sum; else float64 under 2**53; else None (no exact float GEMM)."""
    info = np.iinfo(input_dtype)
    max_x = max(-int(info.min), int(info.max))
    column_bound = max_x * int(np.abs(weights).sum(axis=0).max(initial=0))
    if column_bound < _F32_EXACT:
        return np.float32
    return np.float64 if column_bound < _F64_EXACT else None


def float32_k_splits(input_dtype: np.dtype | type, weights: np.ndarray) -> list[slice]:
    """Consecutive ranges of the depth K of (integer input) @ ``weights`` (K, N), each as long
    as :func:`gemm_dtype`'s float32 bound allows (one range when the whole GEMM is exact in
    float32; a row over the bound by itself gets a range of its own)."""
    info = np.iinfo(input_dtype)
    max_x = max(-int(info.min), int(info.max))
    magnitude = np.abs(np.asarray(weights, np.float64)) * max_x
    splits, start = [], 0
    running = np.zeros(magnitude.shape[1])
    for k in range(magnitude.shape[0]):
        running += magnitude[k]
        if running.max(initial=0) >= _F32_EXACT and k > start:
            splits.append(slice(start, k))
            start, running = k, magnitude[k].copy()
    splits.append(slice(start, magnitude.shape[0]))
    return splits


class IntegerGemm:
    """An exact GEMM of integer rows with constant integer weights (K, N), held as float:
    float32 over :func:`float32_k_splits` when each range is exact, the ranges' results summed
    in float64 (still exact, at a fraction of a float64 GEMM's cost); float64 throughout
    where that would take more than ``MAX_SPLITS`` ranges."""

    MAX_SPLITS = 4

    def __init__(self, input_dtype: np.dtype | type, weights: np.ndarray) -> None:
        splits = float32_k_splits(input_dtype, weights)
        exact = all(gemm_dtype(input_dtype, weights[k]) == np.float32 for k in splits)
        if len(splits) > self.MAX_SPLITS or not exact:
            splits = [slice(0, weights.shape[0])]
            self.dtype: type = np.float64
        else:
            self.dtype = np.float32
        self.splits = splits
        self.weights = np.ascontiguousarray(weights, self.dtype)
        self.depth, self.width = weights.shape
        # The accumulator's type: float64 as soon as ranges are summed.
        self.acc_dtype: type = np.float64 if len(splits) > 1 else self.dtype

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        """rows (M, K) of ``self.dtype`` -> a per-thread work array (M, N) of ``acc_dtype``,
        valid until the next call."""
        count = rows.shape[0]
        acc = scratch("gemm_acc", count * self.width, self.acc_dtype).reshape(count, -1)
        if len(self.splits) == 1:
            return np.matmul(rows, self.weights, out=acc)
        part = scratch("gemm_part", count * self.width, self.dtype).reshape(count, -1)
        for i, k in enumerate(self.splits):
            np.matmul(rows[:, k], self.weights[k], out=part)
            if i == 0:
                np.copyto(acc, part)
            else:
                np.add(acc, part, out=acc)
        return acc


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


class RuyRequantizer:
    """:func:`requantize_ruy` of ``g + offset`` (an exact integer GEMM result ``g`` and a
    per-channel integer ``offset``), plus the output zero point, clamped: in three float64
    passes and one cast instead of about twelve int64 passes, and bit for bit the same.

    Why it is exact. ruy rounds twice, ``h = floor((a*M + 2**30) / 2**31)`` then
    ``floor((h + 2**(r-1)) / 2**r)``; since floor((floor(u) + k) / n) == floor((u + k) / n)
    for integer k and n, that is one floor: ``floor((a*M + R) / 2**S)`` with ``S = 31 + r``
    and ``R = 2**30 + 2**(30 + r)`` (or 2**30 when r is 0; a left shift folds into M). So
    ``y = g * M/2**S + (offset*M + R + (zp + lift) * 2**S) / 2**S`` and ``floor(y) - lift`` is
    the output. Every term is an integer over 2**S: while each integer is below 2**53 the
    float64 products and sums are exact. Setup checks that for every ``g`` whose output lies
    in [lo - 1, hi + 1]; outside that window y may round, but it is monotonic in ``g``, so
    the clamp still lands on lo or hi. ``lift`` (128 for int8) makes y non-negative in the
    clamp window, where the cast's truncation to an unsigned type is the floor; the sign bit
    flipped back gives the signed value.
    """

    def __init__(
        self, scale: np.ndarray, offset: np.ndarray, bounds: tuple[float, float], dtype: np.dtype
    ) -> None:
        self.scale = scale
        self.offset = offset
        self.lo, self.hi = bounds
        self.dtype = dtype
        self.unsigned = np.dtype(f"u{dtype.itemsize}")
        self.sign_bit = 0 if dtype.kind == "u" else 1 << (8 * dtype.itemsize - 1)
        self._tiled: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def store(self, y: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Clamp float64 ``y`` (already scaled and offset) and cast it into ``out``."""
        np.clip(y, self.lo, self.hi, out=y)
        target = out.reshape(y.shape).view(self.unsigned)
        np.copyto(target, y, casting="unsafe")
        if self.sign_bit:
            np.bitwise_xor(target, target.dtype.type(self.sign_bit), out=target)
        return out

    @classmethod
    def build(
        cls,
        multiplier: np.ndarray,
        shift: np.ndarray,
        offset: np.ndarray,
        zero_point: int,
        clamp: tuple[int, int],
        dtype: np.dtype | type,
    ) -> RuyRequantizer | None:
        """The requantizer for per-channel (or broadcast per-tensor) ``multiplier`` and
        ``shift``, per-channel integer ``offset`` added to the GEMM result, the output zero
        point and clamp range; None where some channel's arithmetic would not be exact (the
        caller keeps the int64 path)."""
        dtype = np.dtype(dtype)
        if dtype.kind not in "iu":
            return None
        lift = -int(np.iinfo(dtype).min)
        lo, hi = clamp
        channels = len(offset)
        multiplier = np.broadcast_to(np.asarray(multiplier, np.int64), (channels,))
        shift = np.broadcast_to(np.asarray(shift, np.int64), (channels,))
        scale = np.empty(channels, np.float64)
        base = np.empty(channels, np.float64)
        for c in range(channels):
            m, s, off = int(multiplier[c]), int(shift[c]), int(offset[c])
            if m <= 0:
                return None
            m <<= max(s, 0)
            right = max(-s, 0)
            total = 31 + right
            rounding = (1 << 30) + ((1 << (30 + right)) if right else 0)
            numerator = off * m + rounding + ((zero_point + lift) << total)
            # The accumulators (g + off) whose output is in [lo, hi], widened by one.
            acc_lo = _ceil_div(((lo - zero_point) << total) - rounding, m) - 1
            acc_hi = _ceil_div(((hi - zero_point + 1) << total) - rounding, m)
            g_ends = (acc_lo - off, acc_hi - off)
            if (
                abs(numerator) >= _F64_EXACT
                or max(abs(g) for g in g_ends) * m >= _F64_EXACT
                or max(abs(g * m + numerator) for g in g_ends) >= _F64_EXACT
            ):
                return None
            scale[c] = math.ldexp(m, -total)
            base[c] = math.ldexp(numerator, -total)
        return cls(scale, base, (lo + lift, hi + lift), dtype)

    def _constants(self, block: int) -> tuple[np.ndarray, np.ndarray]:
        """Scale and offset tiled to ``block`` rows: numpy broadcasts a short per-channel
        vector a few values at a time, several times slower than one long contiguous pass."""
        if block not in self._tiled:
            self._tiled[block] = (np.tile(self.scale, block), np.tile(self.offset, block))
        return self._tiled[block]

    def __call__(self, gemm: np.ndarray, out: np.ndarray, block: int = 1) -> np.ndarray:
        """Requantize ``gemm`` (rows, channels; exact integers, float32 or float64) into the
        C-contiguous ``out`` of the same size; ``block`` must divide the rows."""
        rows, channels = gemm.shape
        if rows % block:
            block = 1
        scale, offset = self._constants(block)
        y = scratch("requantize", gemm.size, np.float64).reshape(rows // block, -1)
        if gemm.dtype == np.float64:
            np.multiply(gemm.reshape(y.shape), scale, out=y)
        else:  # widened first: a float32 * float64 multiply casts in small buffers, slower
            np.copyto(y, gemm.reshape(y.shape))
            np.multiply(y, scale, out=y)
        np.add(y, offset, out=y)
        return self.store(y, out)


# --- LiteRT's float accumulation order ------------------------------------------------------

# LiteRT's builtin float CONV_2D on x86 is im2col + Eigen's GEMM (one thread or several),
# compiled without FMA: every product is rounded to float32, then added. Eigen's kernel walks
# the output channels in packets of 8: for those, each output is one chain over k = 0, 1, ...
# in im2col order (filter row, column, input channel), from zero. A remaining half packet of
# 4 channels keeps two chains (even and odd k) over the largest multiple of 8, adds them, then
# the rest of k in order; the last 1-3 channels keep four (k mod 4) over the largest multiple
# of 4, add them pairwise ((0 + 1) + (2 + 3)), then the rest. Pixels go in groups of 4; the
# last M % 4 are one chain in every channel. The bias comes after, then the activation's
# clamp. Found by matching LiteRT bit for bit on builder-made convolutions (random M, K, N;
# one thread and the default pool). Past one of Eigen's depth blocks (kc, from the CPU's L1
# data cache: 1016 with 48 KiB, 680 with 32 KiB) each block is summed so and the blocks added
# in turn (eigen_depth_blocks). Tiny products
# (M + N + K < 20) take other Eigen paths; a single output pixel or a single output channel
# is Eigen's matrix-vector product (eigen_order_gemv, eigen_order_dots), at any depth. BLAS sums in
# another order and differs in the last bit on ~30-60% of outputs.

_requantizing_subgraphs: dict[int, bool] = {}


# Pixels per pass of eigen_order_matmul: at least this many, so that numpy runs each
# broadcast product (channels, pixels) as one long loop per channel; below about 2700 its
# buffered iterator gathers several short rows into one buffer and runs ~4x slower.
_ORDERED_MIN_PIXELS = 4096
# ... and about this many products a pass, so the products and the sums stay in L2.
_ORDERED_PASS_ELEMENTS = 1 << 16


@functools.cache
def _l1_data_bytes() -> int:
    """The first CPU's level-1 data cache, as the CPUID Eigen asks reports it (Linux's
    sysfs); 32 KiB, Eigen's x86 default, where it cannot be read."""
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for index in sorted(root.glob("index*")):
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            if level == "1" and kind in ("Data", "Unified"):
                text = (index / "size").read_text().strip().upper()
                scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1:], 1)
                return int(text.rstrip("KM")) * scale
    except (OSError, ValueError):
        pass
    return 32 * 1024


def eigen_depth_blocks(depth: int) -> list[slice]:
    """The depth blocks (kc) Eigen's GEMM splits K into: as deep as a packed lhs panel of 8
    rows and an rhs panel of 4 columns fit in the L1 data cache beside their 8 x 4 results,
    a multiple of 8, then evened out so the last block is as long as the others allow
    (computeProductBlockingSizes; found bit for bit against LiteRT for K up to 3000)."""
    most = max(((_l1_data_bytes() - 8 * 4 * 4) // (8 * 4 + 4 * 4)) & ~7, 1)
    if depth <= most:
        return [slice(0, depth)]
    size = most
    if depth % most:
        size = most - 8 * ((most - 1 - depth % most) // (8 * (depth // most + 1)))
    return [slice(k, min(k + size, depth)) for k in range(0, depth, size)]


def eigen_order_matmul(rows: np.ndarray, weights: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``rows`` (M, K) @ ``weights`` (K, N) in float32 with the roundings and the order of
    additions of LiteRT's float CONV_2D (see above): each of Eigen's depth blocks
    (:func:`eigen_depth_blocks`) summed on its own, then the blocks added in turn."""
    blocks = eigen_depth_blocks(weights.shape[0])
    _eigen_block_matmul(rows, weights, out, blocks[0])
    if len(blocks) > 1:
        part = np.empty_like(out)
        for block in blocks[1:]:
            out += _eigen_block_matmul(rows, weights, part, block)
    return out


def _eigen_block_matmul(
    rows: np.ndarray, weights: np.ndarray, out: np.ndarray, block: slice
) -> np.ndarray:
    """One depth block of :func:`eigen_order_matmul`. Over chunks of pixels, one product
    (N, pixels) per k is added to the chains it belongs to, so every pass runs along pixels
    in cache; about five times a BLAS GEMM's cost, so only where the last bit matters."""
    if block != slice(0, weights.shape[0]):
        rows, weights = rows[:, block], weights[block]
    depth, width = weights.shape
    full = width - width % 8
    half = full + (4 if width % 8 >= 4 else 0)
    # (first channel, end, chains, depth the chains cover): the remaining k of a group are
    # added in order to the chains' sum.
    groups = [(0, full, 1, depth)] if full else []
    if half > full:
        groups.append((full, half, 2, depth - depth % 8))
    if width > half:
        groups.append((half, width, 4, depth - depth % 4))
    chunk = max(_ORDERED_MIN_PIXELS, _ORDERED_PASS_ELEMENTS // width)
    size = min(chunk, len(rows))
    product = scratch("ordered_product", width * size, np.float32)
    sums = scratch("ordered_sums", width * size, np.float32)
    # Chains 1-3 of the half packet and the last channels (chain 0 lives in the sums).
    spare = scratch("ordered_chains", 3 * (width - full) * size, np.float32)
    columns = np.ascontiguousarray(rows.T)
    weight_columns = weights[:, :, None]  # (K, N, 1): weights[k] against a row of pixels
    for start in range(0, len(rows), chunk):
        stop = min(start + chunk, len(rows))
        count = stop - start
        acc = sums[: width * count].reshape(width, count)
        p = product[: width * count].reshape(width, count)
        pixels = columns[:, start:stop]
        np.multiply(weight_columns[0], pixels[0], out=acc)
        acc += 0  # Eigen's chains start from zero: 0 + -0 is +0
        if full == width:  # packets of 8 only: one chain a channel (the common case)
            for k in range(1, depth):
                np.multiply(weight_columns[k], pixels[k], out=p)
                np.add(acc, p, out=acc)
        else:
            chains = spare[: 3 * (width - full) * count].reshape(3, width - full, count)
            _ordered_groups(groups, weight_columns, pixels, acc, p, chains, full)
        out[start:stop] = acc.T
    tail = len(rows) % 4
    if tail and full < width:  # the last pixels: one chain in every channel
        last = np.multiply(weights[:, :, None], columns[:, None, -tail:])
        out[-tail:] = np.sum(last, axis=0).T
    return out


def eigen_order_gemv(row: np.ndarray, weights: np.ndarray, out: np.ndarray) -> np.ndarray:
    """One output pixel: ``row`` (K,) @ ``weights`` (K, N) as Eigen's row-major
    matrix-vector product sums it, which LiteRT takes for a single pixel (the 1x1
    squeeze-excite convolutions): each output is a dot product in 4-float SSE lanes, lane
    ``k % 4`` one chain from zero over the largest multiple of 4, the lanes reduced as
    ``(0 + 2) + (1 + 3)``, then the remaining k in order. Products rounded to float32 (no
    FMA). Matched bit for bit against LiteRT for K from 1 to 1000."""
    depth = len(row)
    products = np.multiply(row[:, None], weights, dtype=np.float32)
    packed = depth - depth % 4
    zero = np.zeros((1, weights.shape[1]), np.float32)
    lanes = [
        # accumulate runs along axis 0 one row after another: a chain, unlike add.reduce.
        np.add.accumulate(np.concatenate([zero, products[lane:packed:4]]), axis=0)[-1]
        for lane in range(4)
    ]
    total = (lanes[0] + lanes[2]) + (lanes[1] + lanes[3])
    for k in range(packed, depth):
        total += products[k]
    out[...] = total
    return out


def eigen_order_dots(rows: np.ndarray, vector: np.ndarray, out: np.ndarray) -> np.ndarray:
    """One output channel: ``rows`` (M, K) @ ``vector`` (K,) as Eigen's matrix-vector
    product sums each row, the order of :func:`eigen_order_gemv` (4-float lanes from zero,
    reduced as ``(0 + 2) + (1 + 3)``, then the remaining k in order) with the rows as the
    outputs. LiteRT takes it for a convolution with one filter. Matched bit for bit against
    LiteRT for K from 9 to 4608."""
    depth = rows.shape[1]
    packed = depth - depth % 4
    products = np.multiply(rows, vector, dtype=np.float32)
    lanes = []
    for lane in range(4):
        chain = np.zeros(len(rows), np.float32)  # from zero: 0 + -0 is +0
        for k in range(lane, packed, 4):  # in place, one column at a time: no (M, K) copy
            chain += products[:, k]
        lanes.append(chain)
    total, odd = lanes[0], lanes[1]
    total += lanes[2]
    odd += lanes[3]
    total += odd  # (0 + 2) + (1 + 3)
    for k in range(packed, depth):
        total += products[:, k]
    out[...] = total
    return out


def _ordered_groups(
    groups: list[tuple[int, int, int, int]],
    weight_columns: np.ndarray,
    pixels: np.ndarray,
    acc: np.ndarray,
    p: np.ndarray,
    chains: np.ndarray,
    full: int,
) -> None:
    """The chains of :func:`eigen_order_matmul` where a half packet or last channels keep
    several: ``acc`` holds every group's chain 0 (0 + product 0 already in it), ``chains``
    the others of the channels from ``full`` on."""
    depth = len(pixels)
    for k in range(1, depth + 1):
        if k < depth:
            np.multiply(weight_columns[k], pixels[k], out=p)
        for lo, hi, lanes, peel in groups:
            if lanes > 1 and k == peel:
                # The chains summed as Eigen adds its packets: 0 + 1, (0 + 1) + (2 + 3).
                own = chains[:, lo - full : hi - full]
                acc[lo:hi] += own[0]
                if lanes == 4:
                    own[1] += own[2]
                    acc[lo:hi] += own[1]
            if k == depth:
                continue
            lane = k % lanes if k < peel else 0
            if lane == 0:
                acc[lo:hi] += p[lo:hi]
            elif k < lanes:
                np.add(p[lo:hi], 0, out=chains[lane - 1, lo - full : hi - full])
            else:
                chains[lane - 1, lo - full : hi - full] += p[lo:hi]


def float_order_matters(subgraph: Subgraph) -> bool:
    """Whether a float result in ``subgraph`` is turned back into integers: by a hybrid
    kernel (a float input read with constant integer weights: a dynamic-range model, whose
    kernels quantize their float inputs on the fly) or by a QUANTIZE of a float tensor (a
    QAT graph's fake-quant points). There a last-bit difference can move a code by a whole
    step, so the float GEMMs follow LiteRT's accumulation order even where that costs more;
    elsewhere BLAS's faster order is within tolerance. One scan per subgraph, remembered."""
    key = id(subgraph)
    if key not in _requantizing_subgraphs:
        tensors = subgraph.tensors
        found = False
        for node in subgraph.nodes:
            ins = [tensors[i] for i in node.inputs if i >= 0]
            if node.op == "QUANTIZE" and ins and ins[0].dtype == np.float32:
                found = True
            elif any(t.dtype == np.float32 and not t.is_constant for t in ins) and any(
                t.is_constant and t.type_name in ("INT8", "UINT8", "INT4") for t in ins
            ):
                found = True
            if found:
                break
        _requantizing_subgraphs[key] = found
        weakref.finalize(subgraph, _requantizing_subgraphs.pop, key, None)
    return _requantizing_subgraphs[key]

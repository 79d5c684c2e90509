"""Quantization as LiteRT's kernels compute it: parameters, quantize / dequantize, and every
fixed-point requantization rule the CPU reference uses, per op family.

This is the one implementation the CPU reference and every delegate share: the reference's
kernels call these functions, so a delegate that calls them too rounds as the reference does.
It follows TFLite's ``quantization_util`` and ``common.h``, on int64 numpy arrays so that
intermediate products never overflow.

LiteRT does not round the same way in every kernel. Its reference path
(``MultiplyByQuantizedMultiplier`` of ``common.h``) rounds halves away from zero at both of
its steps; the optimized kernels it runs on x86 (NEON code through NEON_2_SSE, and ruy for the
GEMMs) round halves up (toward +inf) in their vector lanes. Which kernel runs depends on the
op, its types and even the channel, so the rules are given per op family:

========================  ==================================================================
op (integer types)        rule
========================  ==================================================================
CONV_2D, FULLY_CONNECTED  :func:`requantize_conv`: halves up at both steps (ruy), per-channel
  (int8, uint8)           multipliers from :func:`conv_multipliers`; a grouped CONV_2D runs
                          the reference kernel (:func:`requantize`)
DEPTHWISE_CONV_2D         :func:`requantize_depthwise`: int8 halves up in the 16- and 8-wide
                          lanes (the first ``channels // 8 * 8`` channels), the reference way
                          on the channels left over; uint8 the reference way throughout
ADD, SUB                  :func:`add_params` (left shift 20, twice the larger input scale),
                          then :func:`add_int8` (int8 ADD on x86) or :func:`add_reference`
16x8 (int16 x int8)       :func:`multiply_by_quantized_multiplier_int64` (int64 accumulators),
                          :func:`multiply_by_real_multiplier` (FULLY_CONNECTED with zero points)
everything else           :func:`requantize` / :func:`multiply_by_quantized_multiplier`
========================  ==================================================================

Scales are float32 everywhere: a .tflite file stores them as float32 and LiteRT's kernels read
them as C ``float`` (``TfLiteQuantizationParams.scale``). :func:`scale_zero_point` returns the
scale as ``np.float32`` so arithmetic on it stays float32 unless a caller widens it on purpose
(``float(scale)``, as LiteRT does where it computes in double).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from offload._graph import Node, Quantization, Subgraph, Tensor

__all__ = [
    "QUANTIZED_TYPES",
    "AddParams",
    "Quantization",
    "RescaleLimit",
    "activation_range_quantized",
    "add_int8",
    "add_params",
    "add_reference",
    "channel_scales",
    "checked_log2",
    "conv_multipliers",
    "depthwise_vector_channels",
    "dequantize",
    "dtype_range",
    "is_quantized",
    "multiply_by_quantized_multiplier",
    "multiply_by_quantized_multiplier_half_up",
    "multiply_by_quantized_multiplier_int64",
    "multiply_by_quantized_multiplier_lanes",
    "multiply_by_real_multiplier",
    "quantize",
    "quantize_multiplier",
    "quantize_multipliers",
    "requantize",
    "requantize_conv",
    "requantize_depthwise",
    "rescale_limit",
    "rounding_divide_by_pot",
    "saturating_rounding_doubling_high_mul",
    "scale_zero_point",
    "tflite_round",
    "unusable_scale",
    "wrap_int32",
]

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
# The integer types LiteRT's quantized kernels take (int4 weights are unpacked to int8 first).
QUANTIZED_TYPES = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16))


def _params(source: Tensor | Quantization | None) -> Quantization | None:
    if source is None or isinstance(source, Quantization):
        return source
    return source.quantization


def is_quantized(tensor: Tensor | None) -> bool:
    """An int8, uint8 or int16 tensor with at least one scale: quantized kernels apply."""
    return (
        tensor is not None
        and tensor.dtype in QUANTIZED_TYPES
        and tensor.quantization is not None
        and tensor.quantization.scale.size > 0
    )


def scale_zero_point(source: Tensor | Quantization | None) -> tuple[np.float32, int]:
    """A tensor's per-tensor ``(scale, zero_point)``: the scale as the float32 LiteRT reads.

    ``(0.0, 0)`` when the tensor carries no quantization. A per-channel tensor gives its
    first channel's values (LiteRT's kernels read per-channel tensors through
    :func:`channel_scales` instead).
    """
    q = _params(source)
    if q is None or q.scale.size == 0:
        return np.float32(0.0), 0
    return np.float32(q.scale[0]), int(q.zero_point[0]) if q.zero_point.size else 0


def channel_scales(source: Tensor | Quantization, channels: int) -> np.ndarray:
    """The float32 scales of ``channels`` output channels (one per-tensor scale broadcast).

    Raises ValueError when the tensor has no quantization or its scales do not number
    ``channels`` (or 1).
    """
    q = _params(source)
    if q is None or q.scale.size == 0:
        where = f"tensor {source.index}" if isinstance(source, Tensor) else "these parameters"
        raise ValueError(f"expected quantization scales on {where}, found none")
    if q.scale.size not in (1, channels):
        raise ValueError(
            f"expected 1 or {channels} quantization scales (one per channel), found {q.scale.size}"
        )
    return np.broadcast_to(q.scale.astype(np.float32), (channels,)).copy()


def dtype_range(dtype: np.dtype | type) -> tuple[int, int]:
    """(min, max) of an integer dtype, the clamp range of quantized values."""
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def unusable_scale(tensors: Sequence[Tensor | None]) -> tuple[int, float] | None:
    """(tensor index, scale) of the first quantization scale among ``tensors`` that is neither
    0 (a converter's "not quantized") nor a finite, positive, normal float32; else None.

    The CPU reference computes with any scale and says where a model is invalid; an engine a
    delegate hands the node to may not (LiteRT's XNNPACK path crashes the process on a
    subnormal scale), so engine delegates decline such nodes with this.
    """
    for t in tensors:
        q = None if t is None else t.quantization
        if t is None or q is None or not q.scale.size:
            continue
        scale = q.scale.astype(np.float32)
        bad = scale[(scale != 0) & ~(np.isfinite(scale) & (scale >= _TINY_SCALE))]
        if bad.size:
            return t.index, float(bad[0])
    return None


# The smallest normal float32: below it a scale is subnormal.
_TINY_SCALE = np.finfo(np.float32).tiny


def wrap_int32(acc: np.ndarray) -> np.ndarray:
    """An exact (int64) accumulator as LiteRT's int32 one holds it: modulo 2**32, signed.

    LiteRT sums int8 and uint8 products (and adds the bias) in int32, which wraps on overflow
    on x86; whatever order it adds in, the result is the true sum modulo 2**32. Apply it
    before requantizing where the kernel accumulates in int32 (FULLY_CONNECTED).
    """
    wide = np.asarray(acc, np.int64)
    return (wide + (1 << 31)) % (1 << 32) - (1 << 31)


def tflite_round(x: np.ndarray | float) -> np.ndarray:
    """std::round: halves away from zero (numpy's round goes to even)."""
    x = np.asarray(x)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _per_axis(q: Quantization, ndim: int) -> tuple[np.ndarray, np.ndarray]:
    scale = q.scale.astype(np.float32)
    zero_point = q.zero_point
    if q.per_channel:
        shape = [1] * ndim
        shape[q.quantized_dimension] = -1
        scale = scale.reshape(shape)
        zero_point = zero_point.reshape(shape)
    return scale, zero_point


def quantize(values: np.ndarray, q: Quantization, dtype: np.dtype | type) -> np.ndarray:
    """float -> integer the way TFLite's QUANTIZE does: ``round(x / scale) + zero_point``
    (halves away from zero), clamped to ``dtype``; per tensor or per channel."""
    lo, hi = dtype_range(dtype)
    values = np.asarray(values, np.float32)
    scale, zero_point = _per_axis(q, values.ndim)
    scaled = tflite_round(values / scale) + zero_point
    return np.clip(scaled, lo, hi).astype(dtype)


def dequantize(values: np.ndarray, q: Quantization | None) -> np.ndarray:
    """integer -> float32: ``scale * (q - zero_point)``, per tensor or per channel.

    With ``q`` None the values are only converted (float16 weights, for instance).
    """
    values = np.asarray(values)
    if q is None:
        return values.astype(np.float32)
    scale, zero_point = _per_axis(q, values.ndim)
    return ((values.astype(np.int64) - zero_point).astype(np.float32) * scale).astype(np.float32)


def quantize_multiplier(real_multiplier: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier: ``(multiplier, shift)`` with the multiplier in Q0.31 and
    ``real = multiplier * 2**(shift - 31)``.

    Formed in double: ``frexp(real)`` splits it into a mantissa in [0.5, 1) and an exponent
    (the shift, positive for a left shift); the mantissa times 2**31 is rounded half away from
    zero into the multiplier, and a mantissa that rounds up to 2**31 becomes 2**30 with the
    shift one higher. A real below 2**-31 gives ``(0, 0)``: the output is the zero point."""
    if real_multiplier == 0.0:
        return 0, 0
    mantissa, shift = math.frexp(real_multiplier)
    q = int(np.sign(mantissa) * math.floor(abs(mantissa * (1 << 31)) + 0.5))
    if q == (1 << 31):
        q //= 2
        shift += 1
    if shift < -31:
        shift, q = 0, 0
    return q, shift


def quantize_multipliers(real_multipliers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel :func:`quantize_multiplier`: (int64 multipliers, int64 shifts)."""
    flat = np.asarray(real_multipliers, np.float64).ravel()
    pairs = [quantize_multiplier(float(m)) for m in flat]
    qm = np.array([p[0] for p in pairs], np.int64)
    shift = np.array([p[1] for p in pairs], np.int64)
    return qm, shift


def saturating_rounding_doubling_high_mul(a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
    """gemmlowp's SaturatingRoundingDoublingHighMul on int32 values held in int64."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    total = ab + nudge
    # C++ integer division truncates toward zero.
    high = np.where(total >= 0, total >> 31, -((-total) >> 31))
    overflow = (a == _INT32_MIN) & (b == _INT32_MIN)
    return np.where(overflow, _INT32_MAX, high)


def rounding_divide_by_pot(x: np.ndarray | int, exponent: np.ndarray | int) -> np.ndarray:
    """gemmlowp's RoundingDivideByPOT: x / 2**exponent, rounding halves away from zero."""
    x = np.asarray(x, np.int64)
    exponent = np.asarray(exponent, np.int64)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def multiply_by_quantized_multiplier(
    x: np.ndarray, multiplier: np.ndarray | int, shift: np.ndarray | int
) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier (double rounding), broadcasting per channel."""
    shift = np.asarray(shift, np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    shifted = np.asarray(x, np.int64) * (np.int64(1) << left)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted, multiplier), right)


def activation_range_quantized(
    activation: str, q: Quantization, dtype: np.dtype | type
) -> tuple[int, int]:
    """CalculateActivationRangeQuantized: the clamp range of a fused activation in q-space."""
    lo, hi = dtype_range(dtype)
    scale, zero_point = scale_zero_point(q)

    def to_q(value: float) -> int:
        return zero_point + int(tflite_round(np.asarray(np.float32(value) / scale)))

    if activation == "RELU":
        return max(lo, to_q(0.0)), hi
    if activation == "RELU6":
        return max(lo, to_q(0.0)), min(hi, to_q(6.0))
    if activation == "RELU_N1_TO_1":
        return max(lo, to_q(-1.0)), min(hi, to_q(1.0))
    return lo, hi


def requantize(
    acc: np.ndarray,
    multiplier: np.ndarray | int,
    shift: np.ndarray | int,
    zero_point: int,
    clamp: tuple[int, int],
    dtype: np.dtype | type,
) -> np.ndarray:
    """int32 accumulator -> output integer type: scale by the fixed-point multiplier, add the
    output zero point, clamp to the activation range."""
    scaled = multiply_by_quantized_multiplier(acc, multiplier, shift) + zero_point
    return np.clip(scaled, clamp[0], clamp[1]).astype(dtype)


# --- requantization per op family -----------------------------------------------------------


def _scale_of(source: Tensor | Quantization | float) -> float:
    """A per-tensor scale as the float32 a .tflite file stores, widened to a Python float."""
    if isinstance(source, (Tensor, Quantization)):
        return float(scale_zero_point(source)[0])
    return float(np.float32(source))


def conv_multipliers(
    input_scale: Tensor | Quantization | float,
    filter_params: Tensor | Quantization,
    output_scale: Tensor | Quantization | float,
    channels: int,
    *,
    float_product: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-output-channel ``(multipliers, shifts)`` of CONV_2D, DEPTHWISE_CONV_2D,
    FULLY_CONNECTED and TRANSPOSE_CONV (int64 arrays of ``channels``), as LiteRT's
    PopulateConvolutionQuantizationParams forms them.

    For each channel c the real multiplier is ``input_scale * filter_scale[c] /
    output_scale``, computed in double from the float32 scales, then split by
    :func:`quantize_multiplier`. A per-tensor filter scale is broadcast to every channel. The
    scales may be given as tensors, their parameters, or numbers.

    ``float_product``: the product ``input_scale * filter_scale`` is rounded to float32 before
    the division, as GetQuantizedConvolutionMultipler does when called without a bias
    (BATCH_MATMUL).
    """
    in_scale, out_scale = _scale_of(input_scale), _scale_of(output_scale)
    scales = channel_scales(filter_params, channels)
    if float_product:
        real = (np.float32(in_scale) * scales).astype(np.float64) / np.float64(out_scale)
    else:
        real = np.float64(in_scale) * scales.astype(np.float64) / np.float64(out_scale)
    return quantize_multipliers(real)


def multiply_by_quantized_multiplier_half_up(
    x: np.ndarray, multiplier: np.ndarray | int, shift: np.ndarray | int
) -> np.ndarray:
    """MultiplyByQuantizedMultiplier as LiteRT's GEMM kernels run it on x86 (ruy): a rounding
    doubling high multiply, then a rounding right shift, both rounding halves up (toward
    +inf). :func:`multiply_by_quantized_multiplier` rounds negative halves away from zero
    instead; the two differ by one on ties of negative values.

    ``(x << left) * multiplier`` plus 2**30, shifted right by 31 (a floor), then plus half the
    divisor, shifted right by ``right``, where ``left``/``right`` are the positive/negative
    parts of ``shift``. Broadcasts per channel like the reference function.
    """
    shift = np.asarray(shift, np.int64)
    right = np.maximum(-shift, 0)
    scaled = np.asarray(x, np.int64) << np.maximum(shift, 0)
    high = (scaled * np.asarray(multiplier, np.int64) + (1 << 30)) >> 31
    return (high + ((np.int64(1) << right) >> 1)) >> right


def multiply_by_quantized_multiplier_lanes(
    x: np.ndarray, multiplier: np.ndarray | int, shift: np.ndarray | int, vector_channels: int
) -> np.ndarray:
    """MultiplyByQuantizedMultiplier over the last (channel) axis the way LiteRT's optimized
    per-channel kernels (int8 DEPTHWISE_CONV_2D, MEAN) run it on x86, where NEON code runs
    through NEON_2_SSE: the channels below ``vector_channels`` go through NEON lanes (vqrdmulh,
    then vrshl, both rounding halves up, as :func:`multiply_by_quantized_multiplier_half_up`),
    the rest through the scalar reference (:func:`multiply_by_quantized_multiplier`).

    Both are one exact int64 expression: the rounding doubling high multiply and the rounding
    shift fold into ``(x * m * 2**left + offset) >> (31 + right)``, the offset carrying both
    roundings; the reference channels take 1 off the second rounding for negative high halves.
    """
    channels = x.shape[-1]
    shift = np.broadcast_to(np.asarray(shift, np.int64), (channels,))
    multiplier = np.broadcast_to(np.asarray(multiplier, np.int64), (channels,))
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    # t = x * m * 2**left + 2**30: the high multiply rounds t / 2**31 down (halves up).
    scaled = np.asarray(x, np.int64) * (multiplier << left) + (np.int64(1) << 30)
    # The rounding shift by ``right`` adds half its divisor, 2**31 * 2**(right - 1).
    half = (np.int64(1) << 31) * ((np.int64(1) << right) >> 1)
    tail = scaled[..., vector_channels:]
    negative_high = tail < 0  # floor(t / 2**31) < 0 exactly when t < 0
    scaled += half
    tail -= (np.int64(1) << 31) * (negative_high & (right[vector_channels:] > 0))
    scaled >>= 31 + right
    return scaled


def multiply_by_quantized_multiplier_int64(
    x: np.ndarray, multiplier: np.ndarray | int, shift: np.ndarray | int
) -> np.ndarray:
    """MultiplyByQuantizedMultiplier for int64 accumulators (the 16x8 reference kernels of
    CONV_2D and DEPTHWISE_CONV_2D): the Q0.31 multiplier is rounded to 16 bits (saturating at
    0x7FFF), the product shifted right by ``15 - shift`` with halves rounded up."""
    qm = np.asarray(multiplier, np.int64)
    reduced = np.where(qm < 0x7FFF0000, (qm + (1 << 15)) >> 16, 0x7FFF)
    total_shift = 15 - np.asarray(shift, np.int64)
    rounded = np.asarray(x, np.int64) * reduced + (np.int64(1) << (total_shift - 1))
    return rounded >> total_shift


def multiply_by_real_multiplier(
    x: np.ndarray, real_multiplier: np.ndarray | float, _shift: object = None
) -> np.ndarray:
    """``round(x * real)`` in double, halves away from zero: the 16x8 FULLY_CONNECTED
    reference kernel (zero points or an int64 bias) scales by the real multiplier itself
    (input_scale * filter_scale / output_scale in double) instead of a fixed-point one."""
    return tflite_round(np.asarray(x, np.float64) * real_multiplier).astype(np.int64)


def requantize_conv(
    acc: np.ndarray,
    multiplier: np.ndarray | int,
    shift: np.ndarray | int,
    zero_point: int,
    clamp: tuple[int, int],
    dtype: np.dtype | type,
) -> np.ndarray:
    """int8 / uint8 CONV_2D and FULLY_CONNECTED as LiteRT runs them on x86: the int32
    accumulator (the bias included) scaled by :func:`multiply_by_quantized_multiplier_half_up`
    (halves up at both steps), plus the output zero point, clamped to the activation range.

    Multipliers from :func:`conv_multipliers` (per channel along the last axis of ``acc``),
    clamp from :func:`activation_range_quantized`. A grouped CONV_2D (input channels a
    multiple of the filter's) runs LiteRT's reference kernel instead: :func:`requantize`.
    """
    scaled = multiply_by_quantized_multiplier_half_up(acc, multiplier, shift) + zero_point
    return np.clip(scaled, clamp[0], clamp[1]).astype(dtype)


# DEPTHWISE_CONV_2D's int8 kernel requantizes 16 channels per step, then 8, then the rest one
# by one: the vector steps cover every whole multiple of 8.
_DEPTHWISE_LANES = 8


def depthwise_vector_channels(channels: int, dtype: np.dtype | type) -> int:
    """How many of ``channels`` output channels LiteRT's DEPTHWISE_CONV_2D requantizes in NEON
    lanes on x86: ``channels // 8 * 8`` for int8 (its per-channel kernel works 16, then 8
    channels at a time), none for uint8 (whose lanes round as the reference does) and int16."""
    if np.dtype(dtype) != np.int8:
        return 0
    return channels // _DEPTHWISE_LANES * _DEPTHWISE_LANES


def requantize_depthwise(
    acc: np.ndarray,
    multiplier: np.ndarray | int,
    shift: np.ndarray | int,
    zero_point: int,
    clamp: tuple[int, int],
    dtype: np.dtype | type,
) -> np.ndarray:
    """DEPTHWISE_CONV_2D as LiteRT runs it on x86, per output channel (the last axis of
    ``acc``, the bias included): int8 rounds halves up in the first
    :func:`depthwise_vector_channels` channels (its 16- and 8-wide lanes) and the reference way
    on the channels left over; uint8 the reference way throughout; int16 outputs (16x8) use
    :func:`multiply_by_quantized_multiplier_int64`. Then the output zero point and the clamp.
    Multipliers from :func:`conv_multipliers`."""
    dtype = np.dtype(dtype)
    if dtype == np.int16:
        scaled = multiply_by_quantized_multiplier_int64(acc, multiplier, shift)
    else:
        acc = np.asarray(acc, np.int64)
        vector = depthwise_vector_channels(acc.shape[-1], dtype)
        multiplier = np.broadcast_to(np.asarray(multiplier, np.int64), acc.shape[-1:])
        shift = np.broadcast_to(np.asarray(shift, np.int64), acc.shape[-1:])
        scaled = multiply_by_quantized_multiplier_lanes(acc, multiplier, shift, vector)
    return np.clip(scaled + zero_point, clamp[0], clamp[1]).astype(dtype)


# --- ADD and SUB ----------------------------------------------------------------------------


@dataclass(frozen=True)
class AddParams:
    """The fixed-point parameters of a quantized ADD or SUB, as LiteRT's Prepare forms them
    (see :func:`add_params`)."""

    left_shift: int
    input1_zero_point: int
    input1_multiplier: int
    input1_shift: int
    input2_zero_point: int
    input2_multiplier: int
    input2_shift: int
    output_zero_point: int
    output_multiplier: int
    output_shift: int


def add_params(
    input1: Tensor | Quantization,
    input2: Tensor | Quantization,
    output: Tensor | Quantization,
    *,
    left_shift: int = 20,
) -> AddParams:
    """ADD / SUB parameters of LiteRT's quantized kernels.

    Both inputs are brought to a common scale, twice the larger input scale, at
    ``left_shift`` extra bits of precision (20 for int8 and uint8, 15 for int16):

    - input i: ``quantize_multiplier(scale_i / (2 * max(scale_1, scale_2)))``;
    - output: ``quantize_multiplier(2 * max(scale_1, scale_2) / (2**left_shift *
      output_scale))``.

    Scales are the float32 ones of the file, divided in double. Not
    ``quantize_multiplier(scale_in / scale_out)``: that skips the common scale and its 20
    bits, and rounds differently.
    """
    (q1, z1), (q2, z2), (qo, zo) = (scale_zero_point(t) for t in (input1, input2, output))
    s1, s2, so = float(q1), float(q2), float(qo)
    twice_max = 2.0 * max(s1, s2)
    m1, sh1 = quantize_multiplier(s1 / twice_max)
    m2, sh2 = quantize_multiplier(s2 / twice_max)
    mo, sho = quantize_multiplier(twice_max / ((1 << left_shift) * so))
    return AddParams(left_shift, z1, m1, sh1, z2, m2, sh2, zo, mo, sho)


def add_reference(
    a: np.ndarray,
    b: np.ndarray,
    params: AddParams,
    clamp: tuple[int, int],
    dtype: np.dtype | type,
    *,
    sign: int = 1,
) -> np.ndarray:
    """Quantized ADD (``sign`` 1) or SUB (-1) the way LiteRT's reference kernels compute it,
    with numpy broadcasting: each input less its zero point, shifted left by
    ``params.left_shift``, scaled by its multiplier; the sum (or difference) scaled by the
    output multiplier, plus the output zero point, clamped. Every scaling is
    :func:`multiply_by_quantized_multiplier` (halves away from zero)."""
    p = params
    xa = (np.asarray(a, np.int64) - p.input1_zero_point) << p.left_shift
    xb = (np.asarray(b, np.int64) - p.input2_zero_point) << p.left_shift
    sa = multiply_by_quantized_multiplier(xa, p.input1_multiplier, p.input1_shift)
    sb = multiply_by_quantized_multiplier(xb, p.input2_multiplier, p.input2_shift)
    raw = multiply_by_quantized_multiplier(sa + sign * sb, p.output_multiplier, p.output_shift)
    return np.clip(raw + p.output_zero_point, clamp[0], clamp[1]).astype(dtype)


# Elements AddElementwiseInt8 / AddScalarBroadcast handle per NEON step before their tails.
_ADD_LANES = 16
_ADD_SCALAR_LANES = 8


def _vshl(x: np.ndarray, amount: int) -> np.ndarray:
    """vshlq_s32 by a constant: left for positive amounts, arithmetic right otherwise."""
    return x << amount if amount >= 0 else x >> -amount


def _add_lanes(
    a: np.ndarray, b: np.ndarray, p: AddParams, clamp: tuple[int, int], early_shift: bool
) -> np.ndarray:
    """int8 ADD in NEON lanes: the inputs' exponents applied as part of the left shift, before
    the multiply (AddElementwiseInt8), or as a truncating right shift after it
    (AddScalarBroadcast); the output step is the reference's."""
    xa = np.asarray(a, np.int64) - p.input1_zero_point
    xb = np.asarray(b, np.int64) - p.input2_zero_point
    mul = saturating_rounding_doubling_high_mul
    if early_shift:
        xa = mul(_vshl(xa, p.left_shift + p.input1_shift), p.input1_multiplier)
        xb = mul(_vshl(xb, p.left_shift + p.input2_shift), p.input2_multiplier)
    else:
        xa = _vshl(mul(xa << p.left_shift, p.input1_multiplier), p.input1_shift)
        xb = _vshl(mul(xb << p.left_shift, p.input2_multiplier), p.input2_shift)
    high = mul(xa + xb, p.output_multiplier)
    out = rounding_divide_by_pot(high, -p.output_shift) + p.output_zero_point
    return np.clip(out, clamp[0], clamp[1]).astype(np.int8)


@functools.lru_cache(maxsize=64)
def _add_int8_tables(
    params: AddParams, clamp: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(elementwise lanes, scalar-broadcast lanes, reference) results over all 65536 pairs of
    int8 codes, indexed by ``(a's byte << 8) | b's byte``: an int8 sum depends only on the
    pair, so a run is one gather per element."""
    codes = np.arange(256, dtype=np.uint8).view(np.int8)
    grid_a, grid_b = (g.reshape(-1) for g in np.meshgrid(codes, codes, indexing="ij"))
    tables = (
        _add_lanes(grid_a, grid_b, params, clamp, early_shift=True),
        _add_lanes(grid_a, grid_b, params, clamp, early_shift=False),
        add_reference(grid_a, grid_b, params, clamp, np.int8),
    )
    for table in tables:
        table.flags.writeable = False
    return tables


def add_int8(a: np.ndarray, b: np.ndarray, params: AddParams, clamp: tuple[int, int]) -> np.ndarray:
    """int8 ADD as LiteRT runs it on x86 (its optimized kernels, NEON through NEON_2_SSE),
    with numpy broadcasting of ``a`` and ``b``.

    LiteRT walks a broadcast as contiguous runs of the output (BinaryBroadcastFiveFold). Same
    shapes are one run. In each run AddElementwiseInt8 takes 16 elements at a time (the
    inputs' exponents applied before their multiply), or, where one side is a single broadcast
    value, AddScalarBroadcast 8 at a time (exponents applied after, truncating); the elements
    left over in each run, and broadcasts that no five-fold walk covers, go through the
    reference (:func:`add_reference`). Parameters from :func:`add_params` (left shift 20).
    """
    elementwise, scalar, reference = _add_int8_tables(params, (int(clamp[0]), int(clamp[1])))
    a, b = np.asarray(a), np.asarray(b)
    index = (a.view(np.uint8).astype(np.intp) << 8) | b.view(np.uint8)
    layout = _fivefold_runs(a.shape, b.shape)
    if layout is None or index.size == 0:
        return reference[index]
    run_length, scalar_broadcast = layout
    lanes = _ADD_SCALAR_LANES if scalar_broadcast else _ADD_LANES
    table = scalar if scalar_broadcast else elementwise
    vector = run_length // lanes * lanes
    runs = index.reshape(-1, run_length)
    result = np.empty(runs.shape, np.int8)
    np.take(table, runs[:, :vector], out=result[:, :vector])
    np.take(reference, runs[:, vector:], out=result[:, vector:])
    return result.reshape(index.shape)


def _fivefold_runs(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, bool] | None:
    """How LiteRT's optimized int8 ADD walks a broadcast (ProcessBroadcastShapes, then
    BinaryBroadcastFiveFold): the length of the contiguous output runs each inner call covers
    and whether that call is the scalar-broadcast kernel; None for the generic broadcast, which
    runs the reference. Same shapes are one run over everything."""
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + tuple(a)
    b = (1,) * (rank - len(b)) + tuple(b)
    if a == b:
        return max(1, int(np.prod(a, dtype=np.int64))), False
    fast = None  # the input whose innermost unequal dimension is 1 is the broadcast one
    for i in range(rank - 1, -1, -1):
        if a[i] != b[i]:
            fast = a if a[i] == 1 else b if b[i] == 1 else None
            break
    if fast is None:
        return None
    other = b if fast is a else a
    y = [1, 1, 1, 1, 1]
    i = rank - 1
    for slot, test in (
        (4, lambda k: fast[k] == other[k]),
        (3, lambda k: fast[k] == 1),
        (2, lambda k: fast[k] == other[k]),
        (1, lambda k: other[k] == 1),
        (0, lambda k: fast[k] == other[k]),
    ):
        while i >= 0 and test(i):
            y[slot] *= other[i] if slot in (4, 3, 0) else fast[i] if slot == 1 else other[i]
            i -= 1
    if i >= 0:
        return None
    if y[4] > 1:
        return y[4], False
    return y[3], True


# --- what LiteRT's kernels take: their multipliers at the scale edges ---------------------
#
# Each requantizing op's LiteRT Prepare forms fixed-point multipliers from the scales of its
# tensors, and some of them must lie in a range: QuantizeMultiplierSmallerThanOneExp
# (tflite/kernels/internal/quantization_util.cc) aborts the process (TFLITE_CHECK) unless its
# multiplier is in (0, 1) with a shift <= 0 once rounded; other kernels refuse the node
# (TF_LITE_ENSURE). Those that pass may still overflow an integer register at run time, so
# that LiteRT's answer at the edge of the input range is a wrapped value that no other engine
# reproduces. :func:`rescale_limit` is that rule, one entry per op, for the CPU reference (which
# refuses what LiteRT's Prepare refuses) and every engine delegate (which declines it).


@dataclass(frozen=True)
class RescaleLimit:
    """Why LiteRT's kernel cannot take a node's quantization scales as they are.

    ``stage`` is ``"prepare"`` where LiteRT's Prepare aborts the process or refuses the node
    (or its kernel's answer is undefined),
    ``"overflow"`` where it runs but a register of its kernel can overflow at the ends of the
    input range, where only LiteRT's builtin kernels give LiteRT's answer.
    ``message`` names the multiplier, the scales and LiteRT's condition.
    """

    stage: Literal["prepare", "overflow"]
    message: str


def checked_log2(x: float) -> tuple[bool, int]:
    """TFLite's CheckedLog2: (is x a power of two within 1e-3 in log space, rounded log2)."""
    log = math.log2(x)
    rounded = round(log)
    return abs(log - rounded) < 1e-3, int(rounded)


# The register LiteRT's optimized 8-bit ADD, SUB and MUL hold a rescaled result in before they
# add the output zero point (int16 lanes: vqmovn_s32 saturates, the vaddq_s16 that follows
# wraps), and the int32 every kernel left-shifts by a positive multiplier exponent.
_INT16_LANE = 1 << 15
_INT32_LIMIT = 1 << 31


def _f32(x: float) -> np.float32:
    return np.float32(x)


def _fmul(a: float, b: float) -> float:
    """a * b in float32 arithmetic, as C++ multiplies two floats (inf on overflow)."""
    with np.errstate(all="ignore"):
        return float(_f32(a) * _f32(b))


def _fdiv(a: float, b: float) -> float:
    with np.errstate(all="ignore"):
        return float(_f32(a) / _f32(b))


def _span(t: Tensor) -> int:
    """The largest |q - zero_point| over the tensor's type: the integer LiteRT's kernels
    start from at the edge of the input range."""
    lo, hi = dtype_range(t.dtype)
    z = scale_zero_point(t)[1]
    return max(abs(lo - z), abs(hi - z))


def _below_one(m: float) -> bool:
    """What QuantizeMultiplierSmallerThanOneExp takes without aborting: 0 < m < 1, and a
    shift <= 0 after rounding (a mantissa that rounds up to 1 raises it to 1)."""
    return math.isfinite(m) and 0.0 < m < 1.0 and quantize_multiplier(m)[1] <= 0


def _left_shift_overflows(acc: float, m: float) -> bool:
    """Whether ``acc`` (the largest magnitude the kernel holds before multiplying by ``m``)
    leaves int32 when MultiplyByQuantizedMultiplier shifts it left by m's exponent; a
    non-finite ``m`` is quantized to garbage (its cast to int64 is undefined)."""
    if not math.isfinite(m):
        return True
    shift = quantize_multiplier(m)[1] if m > 0 else 0
    return acc * 2.0 ** max(shift, 0) >= _INT32_LIMIT


def _add_sub_limit(
    op: str, a: Tensor, b: Tensor, out: Tensor, options: Mapping[str, Any]
) -> RescaleLimit | None:
    """add.cc / sub.cc Prepare: both inputs onto twice the larger input scale at
    ``left_shift`` bits (20 for 8-bit, 15 for int16), the sum back to the output scale."""
    s1, s2, so = (float(scale_zero_point(t)[0]) for t in (a, b, out))
    if out.dtype == np.int16 and options.get("pot_scale_int16", True):
        pots = [s > 0 and math.isfinite(s) and checked_log2(s)[0] for s in (s1, s2, so)]
        if all(pots):
            return None  # the power-of-two path: shifts, no multipliers
    left_shift = 15 if out.dtype == np.int16 else 20
    # ``2 * std::max(float, float)`` and ``(1 << left_shift) * output scale`` are float
    # products in LiteRT (overflow to inf), divided in double.
    twice_max = _fmul(2.0, max(s1, s2))
    denominator = _fmul(float(1 << left_shift), so)
    with np.errstate(all="ignore"):
        m1 = float(np.float64(s1) / twice_max)
        m2 = float(np.float64(s2) / twice_max)
        m_out = float(np.float64(twice_max) / denominator)
    scales = f"input scales {s1!r} and {s2!r}, output scale {so!r}"
    for k, m in ((1, m1), (2, m2)):
        if not _below_one(m):
            return RescaleLimit(
                "prepare",
                f"expected LiteRT's input {k} multiplier, scale / (2 * max(input scales)), in "
                f"(0, 1) (its Prepare aborts the process otherwise), found {m!r} from {scales}",
            )
    # SUB takes an output multiplier above 1 (QuantizeMultiplierGreaterThanOne); ADD does not.
    if not (op == "SUB" and m_out > 1) and not _below_one(m_out):
        return RescaleLimit(
            "prepare",
            f"expected LiteRT's output multiplier, 2 * max(input scales) / (2**{left_shift} * "
            f"output scale), in (0, 1){' or above 1' if op == 'SUB' else ''} (its Prepare "
            f"aborts the process otherwise), found {m_out!r} from {scales}",
        )
    if op == "SUB" and out.dtype == np.int16 and quantize_multiplier(m_out)[1] > 0:
        return RescaleLimit(
            "overflow",
            f"expected LiteRT's int16 SUB output multiplier, 2 * max(input scales) / (2**15 * "
            f"output scale), at most 1, found {m_out!r} from {scales}: its kernel divides by a "
            "negative power of two and answers the difference's sign",
        )
    acc = (_span(a) * m1 + _span(b) * m2) * (1 << left_shift)
    lane = out.dtype.itemsize == 1 and acc * m_out >= _INT16_LANE
    if lane or _left_shift_overflows(acc, m_out):
        return RescaleLimit(
            "overflow",
            f"expected the rescaled {op} within the int16 lanes (8-bit) and int32 of LiteRT's "
            f"kernel, found it reaching {acc * m_out:.3g} from {scales}: LiteRT's answer "
            "wraps",
        )
    return None


def _mul_limit(a: Tensor, b: Tensor, out: Tensor) -> RescaleLimit | None:
    """mul.cc Prepare: QuantizeMultiplier(s1 * s2 / s_out), in float; it never aborts."""
    s1, s2, so = (float(scale_zero_point(t)[0]) for t in (a, b, out))
    m = _fdiv(_fmul(s1, s2), so)
    acc = float(_span(a) * _span(b))
    lane = out.dtype.itemsize == 1 and acc * m >= _INT16_LANE
    if lane or _left_shift_overflows(acc, m):
        return RescaleLimit(
            "overflow",
            f"expected the rescaled MUL within the int16 lanes (8-bit) and int32 of LiteRT's "
            f"kernel, found its multiplier {m!r} taking the product to {acc * m:.3g} (input "
            f"scales {s1!r} and {s2!r}, output scale {so!r}): LiteRT's answer wraps",
        )
    return None


def _squared_difference_limit(a: Tensor, b: Tensor, out: Tensor) -> RescaleLimit | None:
    """squared_difference.cc Prepare (int8): inputs onto twice the larger scale at 7 bits, the
    square back by (2 * max)**2 / (2**14 * s_out); every multiplier below 1 or it aborts."""
    if out.dtype != np.int8:
        return None
    s1, s2, so = (float(scale_zero_point(t)[0]) for t in (a, b, out))
    twice_max = _fmul(2.0, max(s1, s2))
    denominator = _fmul(float(1 << 14), so)
    with np.errstate(all="ignore"):
        ms = (
            float(np.float64(s1) / twice_max),
            float(np.float64(s2) / twice_max),
            float(np.float64(twice_max) * twice_max / denominator),
        )
    for what, m in zip(("input 1", "input 2", "output"), ms):
        if not _below_one(m):
            return RescaleLimit(
                "prepare",
                f"expected LiteRT's {what} multiplier"
                + (", (2 * max(input scales))**2 / (2**14 * output scale)," * (what == "output"))
                + f" in (0, 1) (its Prepare aborts the process otherwise), found {m!r} from "
                f"input scales {s1!r} and {s2!r}, output scale {so!r}",
            )
    return None


def _hard_swish_limit(x: Tensor, out: Tensor) -> RescaleLimit | None:
    """activations.cc HardSwishPrepare (8-bit): the output multiplier s_in / 128 / s_out, in
    float, must have an exponent <= 0 (TF_LITE_ENSURE: the node is refused)."""
    if out.dtype.itemsize != 1:
        return None
    s_in, so = (float(scale_zero_point(t)[0]) for t in (x, out))
    m = _fdiv(_fmul(1.0 / 128.0, s_in), so)
    if math.isfinite(m) and m > 0 and quantize_multiplier(m)[1] > 0:
        return RescaleLimit(
            "prepare",
            f"expected LiteRT's output multiplier, input scale / 128 / output scale, below 1 "
            f"(its Prepare refuses the node otherwise), found {m!r} from input scale "
            f"{s_in!r}, output scale {so!r}",
        )
    # A multiplier past float range, or a left shift past 30 bits, reaches LiteRT's kernel as
    # undefined C (QuantizeMultiplier's frexp of inf; the reluish shift below): its answer
    # is whatever this build's compiler made of that, so offload refuses rather than guess.
    if not math.isfinite(m):
        return RescaleLimit(
            "prepare",
            f"expected a finite output multiplier, input scale / 128 / output scale, found "
            f"{m!r} from input scale {s_in!r}, output scale {so!r} (LiteRT's answer is "
            "undefined there)",
        )
    # The kernel left-shifts by the "reluish" multiplier's exponent less one as the C
    # ``1 << amount`` on an int, which past 30 is undefined (x86 masks the amount to 5 bits).
    reluish = _fdiv(_fmul(1.0 / 128.0, s_in), 3.0 / 32768.0)
    if not math.isfinite(reluish):
        shift: int | float = math.inf
    else:
        shift = quantize_multiplier(reluish)[1] - 1 if reluish > 0 else 0
    if shift > 30:
        return RescaleLimit(
            "prepare",
            f"expected LiteRT's reluish multiplier, input scale / 128 / (3 / 32768), to shift "
            f"left by at most 30 bits, found {shift} from input scale {s_in!r} (output scale "
            f"{so!r}): LiteRT's answer comes from an undefined C shift",
        )
    return None


def _concatenation_limit(inputs: Sequence[Tensor], out: Tensor) -> RescaleLimit | None:
    """concatenation.cc Prepare (int8): every input on the output's scale and zero point
    (TF_LITE_ENSURE_EQ: the node is refused); int16 and uint8 take any scales."""
    if out.dtype != np.int8:
        return None
    so, zo = scale_zero_point(out)
    for k, t in enumerate(inputs):
        s, z = scale_zero_point(t)
        if s != so or z != zo:
            return RescaleLimit(
                "prepare",
                f"expected every input on the output's scale {float(so)!r} and zero point "
                f"{zo} (LiteRT's int8 CONCATENATION does not rescale: its Prepare refuses the "
                f"node), found scale {float(s)!r} and zero point {z} on input {k}",
            )
    return None


def _reduce_limit(op: str, x: Tensor, out: Tensor) -> RescaleLimit | None:
    """reduce.cc PrepareMeanOrSum: QuantizeMultiplier(s_in / s_out), which never aborts; the
    sum of the reduced elements is shifted left by its exponent in int32. MEAN's kernels
    divide the multiplier by the count first (a smaller shift), so for MEAN this bound
    declines a little more than it must."""
    s_in, so = (float(scale_zero_point(t)[0]) for t in (x, out))
    with np.errstate(all="ignore"):
        m = float(np.float64(s_in) / np.float64(so))
    count = max(1, math.prod(x.shape) // max(1, math.prod(out.shape)))
    acc = float(count * _span(x))
    if _left_shift_overflows(acc, m):
        return RescaleLimit(
            "overflow",
            f"expected the {op} of {count} elements, shifted left by the exponent of LiteRT's "
            f"multiplier {m!r}, within int32, found it past (input scale {s_in!r}, output "
            f"scale {so!r}): LiteRT's answer wraps",
        )
    return None


def _spatial_mean(node: Node, subgraph: Subgraph, x: Tensor, out: Tensor) -> bool:
    """Whether LiteRT's optimized resolver runs the node's MEAN through its dedicated 4-D mean
    over height and width (int8 and uint8, keep_dims, axes 1 and 2); from the output's shape
    where the axes are not a constant."""
    if x.dtype not in (np.int8, np.uint8) or len(x.shape) != 4 or len(out.shape) != 4:
        return False
    if not node.options.get("keep_dims", False):
        return False
    index = node.inputs[1] if len(node.inputs) > 1 else -1
    axis = subgraph.tensors[index] if 0 <= index < len(subgraph.tensors) else None
    if axis is not None and axis.is_constant:
        axes = [int(a) % 4 for a in np.asarray(axis.constant_value()).ravel()]
        return len(axes) == 2 and sorted(axes) == [1, 2]
    return tuple(out.shape) == (x.shape[0], 1, 1, x.shape[3])


def _mean_undefined(node: Node, subgraph: Subgraph, x: Tensor, out: Tensor) -> RescaleLimit | None:
    """MEAN's scales where LiteRT's kernel leaves C++'s defined behaviour, so that its answer
    is whatever the compiler made of it, not a rule to follow: its int32
    MultiplyByQuantizedMultiplier shifts left by the multiplier's exponent as ``1 << shift``,
    past the int's width from a shift of 32 (input over output scale about 2**31 times the
    element count, and more); the 4-D mean over height and width (optimized Mean4D) also
    casts ``input zero point * input scale / output scale`` (float32) to int32, out of range
    from 2**31. The reference kernel (int16, other axes) folds 1/count into the multiplier
    first (reduce.h QuantizedMeanOrSum), the 4-D one into the float32 scale."""
    s_in, z_in = scale_zero_point(x)
    s_out = scale_zero_point(out)[0]
    count = max(1, math.prod(x.shape) // max(1, math.prod(out.shape)))
    ratio = f"input scale {float(s_in)!r}, output scale {float(s_out)!r}, {count} elements"
    spatial = _spatial_mean(node, subgraph, x, out)
    with np.errstate(all="ignore"):
        if spatial:
            temp = np.float32(z_in) * s_in / s_out
            temp = temp + np.float32(0.5) if temp > 0 else temp - np.float32(0.5)
            if not -(2.0**31) <= float(temp) < 2.0**31:
                return RescaleLimit(
                    "prepare",
                    f"expected LiteRT's MEAN bias, input zero point {z_in} times input scale "
                    f"over output scale ({float(temp)!r}), within int32, found it past "
                    f"({ratio}): LiteRT casts it to int32, which C++ leaves undefined",
                )
            real = float(s_in / (np.float32(count) * s_out))
        else:
            real = float(np.float64(s_in) / np.float64(s_out))
    if math.isfinite(real):
        shift = quantize_multiplier(real)[1]
        if not spatial:
            shift -= min(count.bit_length() - 1, 32, 31 + shift)
        if shift < _INT32_BITS:
            return None
        what = f"a left shift of {shift} bits"
    else:  # its cast to an integer in QuantizeMultiplier is undefined too
        what = f"a multiplier of {real!r}"
    return RescaleLimit(
        "prepare",
        f"expected LiteRT's MEAN multiplier to shift an int32 left by at most 31 bits, found "
        f"{what} ({ratio}): C++ leaves that undefined, so LiteRT's answer is no rule to follow",
    )


# The width of the int LiteRT's MultiplyByQuantizedMultiplier shifts left as ``1 << shift``.
_INT32_BITS = 32


# The real bounds of each fused activation LiteRT quantizes onto the output's scale
# (kernel_util.cc CalculateActivationRangeQuantizedImpl).
_ACTIVATION_BOUNDS = {"RELU": (0.0,), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}

# The ops whose LiteRT kernel calls CalculateActivationRangeQuantized on a quantized path,
# each with the input whose type selects that path (an int8/uint8/int16 one; a float input
# with quantized weights is the hybrid path, which clamps in float). Those listed as
# ``prepare`` call it in Prepare (through PopulateConvolutionQuantizationParams for the
# convolutions) and refuse the node when it fails. The pools call it at Eval and drop the
# failed status, then clamp to a bound the failed call never set (uint8 AVERAGE_POOL_2D alone
# checks it and fails the invoke): LiteRT's answer is undefined there, so offload refuses
# those too rather than give one of its own.
_ACTIVATION_RANGE_OPS: dict[str, tuple[Literal["prepare", "eval"], int]] = {
    "ADD": ("prepare", 0),
    "SUB": ("prepare", 0),
    "MUL": ("prepare", 0),
    "DIV": ("prepare", 0),
    "FULLY_CONNECTED": ("prepare", 0),
    "CONV_2D": ("prepare", 0),
    "DEPTHWISE_CONV_2D": ("prepare", 0),
    "TRANSPOSE_CONV": ("prepare", 2),
    "AVERAGE_POOL_2D": ("eval", 0),
    "MAX_POOL_2D": ("eval", 0),
}


def _activation_range_limit(node: Node, subgraph: Subgraph) -> RescaleLimit | None:
    """kernel_util.cc Quantize: each bound of the fused activation divided by the output
    scale in float32 and rounded must fit int32 (``no_integer_overflow_from_quantization``):
    RELU6 or RELU_N1_TO_1 onto an output scale under about 3e-9, for one. Where it does not,
    LiteRT's Prepare refuses the node, or, for the pools, its answer is undefined."""
    entry = _ACTIVATION_RANGE_OPS.get(node.op)
    activation = node.options.get("fused_activation_function")
    bounds = _ACTIVATION_BOUNDS.get(activation) if isinstance(activation, str) else None
    if entry is None or not bounds:
        return None
    when, selector = entry
    count = len(subgraph.tensors)
    picks = (node.inputs[selector] if selector < len(node.inputs) else -1, node.outputs[0])
    if not all(0 <= t < count for t in picks):
        return None
    x, out = (subgraph.tensors[t] for t in picks)
    if x.dtype not in QUANTIZED_TYPES or not is_quantized(out):
        return None
    scale = float(scale_zero_point(out)[0])
    for bound in bounds:
        q = np.round(_fdiv(bound, scale)) if bound else 0.0
        if not -float(_INT32_LIMIT) <= q <= float(_INT32_LIMIT):
            consequence = (
                "LiteRT's Prepare refuses the node"
                if when == "prepare"
                else "LiteRT's kernel drops that failure and clamps to a bound it never set, "
                "so its answer is undefined"
            )
            return RescaleLimit(
                "prepare",
                f"expected the fused {activation}'s bound {bound:g} on the output scale "
                f"{scale!r} to fit int32, found {q:.3g} ({consequence})",
            )
    return None


def rescale_limit(node: Node, subgraph: Subgraph) -> RescaleLimit | None:
    """Why LiteRT's kernel cannot take ``node``'s quantization scales as they are, or None.

    One rule per requantizing op, from the multipliers LiteRT's Prepare forms: ADD, SUB,
    SQUARED_DIFFERENCE (its Prepare aborts the process), HARD_SWISH, CONCATENATION (it refuses
    the node), MUL, MEAN, SUM (they run, and overflow past the bounds given in each
    message; MEAN's kernel is undefined past a 31-bit shift, refused there). Before those,
    on every op that quantizes a fused activation's bounds onto the output scale
    (``_ACTIVATION_RANGE_OPS``: ADD to TRANSPOSE_CONV, and the pools), a bound that leaves
    int32 there, which LiteRT's Prepare refuses (the pools' answer is then
    undefined). The CPU reference raises where the stage is ``"prepare"``, as LiteRT would;
    an engine delegate declines the node at either stage (``offload.check_engine_node``),
    LiteRT's own builtin kernels excepted at ``"overflow"``, where theirs is the answer.
    Nodes whose tensors are not quantized, or do not have the types the op takes, get None
    (the type checks say the rest).
    """
    count = len(subgraph.tensors)
    if not node.outputs or not 0 <= node.outputs[0] < count:
        return None
    refused = _activation_range_limit(node, subgraph)
    if refused is not None:
        return refused
    out = subgraph.tensors[node.outputs[0]]
    data = [
        subgraph.tensors[t] if 0 <= t < count else None
        for t in (node.inputs if node.op == "CONCATENATION" else node.inputs[:2])
    ]
    if node.op in ("MEAN", "SUM", "HARD_SWISH"):
        data = data[:1]
    tensors = [*data, out]
    if not data or not all(
        t is not None and is_quantized(t) and t.dtype == out.dtype for t in tensors
    ):
        return None
    ready = [t for t in tensors if t is not None]
    if node.op in ("ADD", "SUB") and len(ready) == 3:
        return _add_sub_limit(node.op, ready[0], ready[1], out, node.options)
    if node.op == "MUL" and len(ready) == 3:
        return _mul_limit(ready[0], ready[1], out)
    if node.op == "SQUARED_DIFFERENCE" and len(ready) == 3:
        return _squared_difference_limit(ready[0], ready[1], out)
    if node.op == "HARD_SWISH":
        return _hard_swish_limit(ready[0], out)
    if node.op == "CONCATENATION":
        return _concatenation_limit(ready[:-1], out)
    if node.op == "MEAN":
        undefined = _mean_undefined(node, subgraph, ready[0], out)
        if undefined is not None:
            return undefined
    if node.op in ("MEAN", "SUM"):
        return _reduce_limit(node.op, ready[0], out)
    return None

"""Fixed-point requantization as LiteRT's kernels compute it: TFLite's multipliers, gemmlowp's
rounding steps, and the rule per op family (CONV_2D and FULLY_CONNECTED through ruy,
DEPTHWISE_CONV_2D's NEON lanes, the 16x8 int64 kernels); see :mod:`offload.quant`'s table.
"""

from __future__ import annotations

import math

import numpy as np

from offload._graph import Quantization, Tensor
from offload._quant_params import channel_scales, scale_zero_point, tflite_round

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1


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


def _output(
    scaled: np.ndarray, zero_point: int, clamp: tuple[int, int], dtype: np.dtype | type
) -> np.ndarray:
    """A scaled accumulator as the output type: plus the zero point, clamped to the range."""
    return np.clip(scaled + zero_point, clamp[0], clamp[1]).astype(dtype)


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
    scaled = multiply_by_quantized_multiplier(acc, multiplier, shift)
    return _output(scaled, zero_point, clamp, dtype)


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
    scaled = multiply_by_quantized_multiplier_half_up(acc, multiplier, shift)
    return _output(scaled, zero_point, clamp, dtype)


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
    return _output(scaled, zero_point, clamp, dtype)

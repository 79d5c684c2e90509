"""TFLite's integer arithmetic, vectorised: fixed-point multipliers, rounding, requantization.

These follow the semantics of TFLite's ``quantization_util`` and ``common.h`` (the
double-rounding ``MultiplyByQuantizedMultiplier`` that LiteRT's builtin kernels use), on int64
numpy arrays so intermediate products never overflow.
"""

from __future__ import annotations

import math

import numpy as np

from offload._graph import Quantization

__all__ = [
    "quantize_multiplier",
    "quantize_multipliers",
    "multiply_by_quantized_multiplier",
    "rounding_divide_by_pot",
    "saturating_rounding_doubling_high_mul",
    "tflite_round",
    "quantize",
    "dequantize",
    "dtype_range",
    "activation_range_quantized",
    "requantize",
    "quantize_rows",
]

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1


def tflite_round(x: np.ndarray | float) -> np.ndarray:
    """std::round: halves away from zero (numpy's round goes to even)."""
    x = np.asarray(x)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def quantize_multiplier(real_multiplier: float) -> tuple[int, int]:
    """(quantized_multiplier in Q0.31, shift) with real = qm * 2**(shift - 31)."""
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
    """Per-channel version of :func:`quantize_multiplier`: (int64 multipliers, int64 shifts)."""
    flat = np.asarray(real_multipliers, np.float64).ravel()
    pairs = [quantize_multiplier(float(m)) for m in flat]
    qm = np.array([p[0] for p in pairs], np.int64)
    shift = np.array([p[1] for p in pairs], np.int64)
    return qm, shift


def saturating_rounding_doubling_high_mul(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
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


def rounding_divide_by_pot(x: np.ndarray, exponent: np.ndarray | int) -> np.ndarray:
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


def dtype_range(dtype: np.dtype | type) -> tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def quantize(values: np.ndarray, q: Quantization, dtype: np.dtype | type) -> np.ndarray:
    """float -> integer the way TFLite's QUANTIZE does (round half away from zero, clamp)."""
    lo, hi = dtype_range(dtype)
    scale = q.scale.astype(np.float32)
    zero_point = q.zero_point
    values = np.asarray(values, np.float32)
    if q.per_channel:
        shape = [1] * values.ndim
        shape[q.quantized_dimension] = -1
        scale = scale.reshape(shape)
        zero_point = zero_point.reshape(shape)
    scaled = tflite_round(values / scale) + zero_point
    return np.clip(scaled, lo, hi).astype(dtype)


def dequantize(values: np.ndarray, q: Quantization | None) -> np.ndarray:
    """integer -> float32: scale * (q - zero_point), per tensor or per channel."""
    values = np.asarray(values)
    if q is None:
        return values.astype(np.float32)
    scale = q.scale.astype(np.float32)
    zero_point = q.zero_point
    if q.per_channel:
        shape = [1] * values.ndim
        shape[q.quantized_dimension] = -1
        scale = scale.reshape(shape)
        zero_point = zero_point.reshape(shape)
    return ((values.astype(np.int64) - zero_point).astype(np.float32) * scale).astype(np.float32)


def activation_range_quantized(
    activation: str, q: Quantization, dtype: np.dtype | type
) -> tuple[int, int]:
    """CalculateActivationRangeQuantized: the clamp range of a fused activation in q-space."""
    lo, hi = dtype_range(dtype)
    scale = float(q.scale[0])
    zero_point = int(q.zero_point[0]) if q.zero_point.size else 0

    def to_q(value: float) -> int:
        return zero_point + int(tflite_round(np.float32(value) / np.float32(scale)))

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


def quantize_rows(x: np.ndarray, asymmetric: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TFLite's BatchQuantizeFloats on a (rows, n) float32 array: each row to int8 with its own
    scale, symmetric in [-127, 127] or asymmetric in [-128, 127] with a zero point.

    Returns (quantized as int32, float32 scale per row, int32 offset per row).
    """
    x = np.asarray(x, np.float32)
    lo = x.min(axis=1) if x.shape[1] else np.zeros(x.shape[0], np.float32)
    hi = x.max(axis=1) if x.shape[1] else np.zeros(x.shape[0], np.float32)
    if not asymmetric:
        rng = np.maximum(np.abs(lo), np.abs(hi))
        zero = rng == 0
        safe = np.where(zero, np.float32(1), rng)
        scale = np.where(zero, np.float32(1), safe / np.float32(127)).astype(np.float32)
        inv = (np.float32(127) / safe).astype(np.float32)
        # Round the float32 product exactly as std::round would (hence float64 for the +0.5).
        q = tflite_round((x * inv[:, None]).astype(np.float64))
        q = np.clip(q, -127, 127).astype(np.int32)
        q[zero] = 0
        return q, scale, np.zeros(x.shape[0], np.int32)
    # The scale and zero point are derived in double, as in AsymmetricQuantizeFloats.
    rmin = np.minimum(lo, 0).astype(np.float64)
    rmax = np.maximum(hi, 0).astype(np.float64)
    zero = rmin == rmax
    scale64 = np.where(zero, 1.0, (rmax - rmin) / 255.0)
    zp_from_min = -128.0 - rmin / scale64
    zp_from_max = 127.0 - rmax / scale64
    err_min = 128.0 + np.abs(rmin / scale64)
    err_max = 127.0 + np.abs(rmax / scale64)
    zp = np.where(err_min < err_max, zp_from_min, zp_from_max)
    offset = np.clip(tflite_round(zp), -128, 127).astype(np.int32)
    offset[zero] = 0
    scale = scale64.astype(np.float32)
    inv = (np.float32(1) / scale).astype(np.float32)
    q = tflite_round((offset[:, None].astype(np.float32) + x * inv[:, None]).astype(np.float64))
    q = np.clip(q, -128, 127).astype(np.int32)
    q[zero] = 0
    return q, scale, offset

"""Quantization as LiteRT's kernels compute it: parameters, quantize / dequantize, and the
fixed-point requantization multipliers.

This is the one implementation the CPU reference and every delegate share. It follows TFLite's
``quantization_util`` and ``common.h`` (the double-rounding ``MultiplyByQuantizedMultiplier``
of LiteRT's builtin kernels), on int64 numpy arrays so intermediate products never overflow.

Scales are float32 everywhere: a .tflite file stores them as float32 and LiteRT's kernels read
them as C ``float`` (``TfLiteQuantizationParams.scale``). :func:`scale_zero_point` returns the
scale as ``np.float32`` so arithmetic on it stays float32 unless a caller widens it on purpose
(``float(scale)``, as LiteRT does where it computes in double).
"""

from __future__ import annotations

import math

import numpy as np

from offload._graph import Quantization, Tensor

__all__ = [
    "QUANTIZED_TYPES",
    "Quantization",
    "activation_range_quantized",
    "channel_scales",
    "dequantize",
    "dtype_range",
    "is_quantized",
    "multiply_by_quantized_multiplier",
    "quantize",
    "quantize_multiplier",
    "quantize_multipliers",
    "requantize",
    "rounding_divide_by_pot",
    "saturating_rounding_doubling_high_mul",
    "scale_zero_point",
    "tflite_round",
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
    ``real = multiplier * 2**(shift - 31)``."""
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


def activation_range_quantized(
    activation: str, q: Quantization, dtype: np.dtype | type
) -> tuple[int, int]:
    """CalculateActivationRangeQuantized: the clamp range of a fused activation in q-space."""
    lo, hi = dtype_range(dtype)
    scale, zero_point = scale_zero_point(q)

    def to_q(value: float) -> int:
        return zero_point + int(tflite_round(np.float32(value) / scale))

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

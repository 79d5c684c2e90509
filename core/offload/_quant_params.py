"""Quantization parameters as LiteRT's kernels read them, quantize / dequantize, and the clamp
range of a fused activation: the ground the requantization rules of :mod:`offload.quant` stand on.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload._graph import Quantization, Tensor

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

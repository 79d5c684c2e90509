"""Shared machinery of the convolution family (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED,
TRANSPOSE_CONV, BATCH_MATMUL): patch extraction, weight preparation, requantization multipliers
and the on-the-fly input quantization of the hybrid kernels. The padding rule itself is the
public :mod:`offload.geometry`, shared with delegates.

Integer dot products are computed as float64 GEMMs: every int8/int16 product and every partial
sum stays far below 2**53, so the result is exact and BLAS-fast, unlike numpy's integer matmul.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

import numpy as np

from offload.geometry import Geometry
from offload.ops._base import ShapeContext, check_shape
from offload.ops._quant import (
    activation_range_quantized,
    dtype_range,
    multiply_by_quantized_multiplier,
    quantize_multipliers,
    quantize_rows,  # noqa: F401  (re-exported)
    scale_zp,
    tflite_round,
)
from offload.quant import channel_scales

if TYPE_CHECKING:
    from offload._graph import Quantization, Tensor
    from offload.ops._base import OpKernel

__all__ = [
    "pad_spatial",
    "patches",
    "im2col",
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


def im2col(
    x: np.ndarray,
    g: Geometry,
    filter_hw: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int] = (1, 1),
    pad_value: float = 0,
) -> np.ndarray:
    """The (N*OH*OW, KH*KW*C) patch matrix, rows in output order, columns in OHWI filter order."""
    n, _, _, c = x.shape
    if filter_hw == (1, 1) and stride == (1, 1) and (g.out_h, g.out_w) == x.shape[1:3]:
        return x.reshape(-1, c)  # a 1x1 stride-1 convolution is a plain GEMM on the input
    view = patches(pad_spatial(x, g, pad_value), g, filter_hw, stride, dilation)
    return view.reshape(n * g.out_h * g.out_w, filter_hw[0] * filter_hw[1] * c)


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
    """Per-channel (multiplier, shift) of input_scale * filter_scale / output_scale.

    ``float_product``: the product input_scale * filter_scale is rounded to float32 first, as
    GetQuantizedConvolutionMultipler does when called without a bias (BATCH_MATMUL).
    """
    scales = channel_scales(filter_q, channels)
    if float_product:
        real = (np.float32(input_scale) * scales).astype(np.float64) / np.float64(output_scale)
    else:
        real = np.float64(np.float32(input_scale)) * scales.astype(np.float64)
        real = real / np.float64(np.float32(output_scale))
    return quantize_multipliers(real)


def requantize_wide(
    acc: np.ndarray, multiplier: np.ndarray | int, shift: np.ndarray | int
) -> np.ndarray:
    """MultiplyByQuantizedMultiplier for int64 accumulators (the 16x8 reference kernels): the
    multiplier is reduced to 16 bits and applied with one rounding shift."""
    qm = np.asarray(multiplier, np.int64)
    reduced = np.where(qm < 0x7FFF0000, (qm + (1 << 15)) >> 16, 0x7FFF)
    total_shift = 15 - np.asarray(shift, np.int64)
    rounded = np.asarray(acc, np.int64) * reduced + (np.int64(1) << (total_shift - 1))
    return rounded >> total_shift


def requantize_ruy(
    acc: np.ndarray, multiplier: np.ndarray | int, shift: np.ndarray | int
) -> np.ndarray:
    """The multiplier of LiteRT's GEMM-based integer kernels on x86 (cpu_backend_gemm -> ruy):
    a rounding doubling high multiply, then a rounding right shift with halves rounded up.

    Unlike TFLite's reference MultiplyByQuantizedMultiplier the second rounding sends ties
    toward +inf; found by matching LiteRT's int8 CONV_2D bit for bit on random cases.
    """
    shift = np.asarray(shift, np.int64)
    right = np.maximum(-shift, 0)
    x = np.asarray(acc, np.int64) << np.maximum(shift, 0)
    high = (x * np.asarray(multiplier, np.int64) + (1 << 30)) >> 31
    return (high + ((np.int64(1) << right) >> 1)) >> right


def requantize_real(acc: np.ndarray, real_scale: np.ndarray, _shift: object = None) -> np.ndarray:
    """round(acc * scale) in double, halves away from zero: the 16x8 FULLY_CONNECTED reference
    kernel scales by the real multiplier instead of a fixed-point one."""
    return tflite_round(np.asarray(acc, np.float64) * real_scale).astype(np.int64)


Rounding = Literal["double", "ruy", "wide", "real"]

_REQUANTIZE = {
    "double": multiply_by_quantized_multiplier,
    "ruy": requantize_ruy,
    "wide": requantize_wide,
    "real": requantize_real,
}


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

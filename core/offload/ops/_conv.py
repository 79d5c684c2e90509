"""Shared machinery of the convolution family (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED,
TRANSPOSE_CONV, BATCH_MATMUL): patch extraction, weight preparation, requantization multipliers
and the on-the-fly input quantization of the hybrid kernels. The padding rule itself is the
public :mod:`offload.geometry`, shared with delegates.

Integer dot products are computed as float GEMMs: every int8/int16 product and every partial
sum stays far below 2**53, so a float64 result is exact and BLAS-fast, unlike numpy's integer
matmul; float32 is exact too while every partial sum stays below 2**24, which setup checks
against the actual weights (:func:`gemm_dtype`). The int8 kernels then requantize in float64
where that is provably exact (:class:`RuyRequantizer`) instead of in int64 passes. Those live
in :mod:`offload.ops._exact_gemm`, LiteRT's float accumulation order in
:mod:`offload.ops._float_order`; both are re-exported here for the op modules.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import numpy as np

from offload.geometry import Geometry, window_options
from offload.ops._base import Shape, ShapeContext, check_shape
from offload.ops._exact_gemm import (
    ROWS_PER_CHUNK_ELEMENTS,
    IntegerGemm,
    RuyRequantizer,
    float32_k_splits,
    gemm_dtype,
    scratch,
)
from offload.ops._float_order import (
    eigen_depth_blocks,
    eigen_order_dots,
    eigen_order_gemv,
    eigen_order_matmul,
    float_order_matters,
)
from offload.ops._quant import (
    activation_range_quantized,
    dtype_range,
    multiply_by_quantized_multiplier,
    quantize_rows,
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
    "WindowShapeRule",
    "window_shape",
    "conv_output_shapes",
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
    """The (N*OH*OW, KH*KW*C) patch matrix, rows in output order, columns in OHWI filter order.
    For inputs with few channels, a transposed view of the C-contiguous (KH*KW*C, N*OH*OW)
    matrix copied from the windows in one pass along output pixels: BLAS reads either
    layout."""
    n, _, _, c = x.shape
    if filter_hw == (1, 1) and stride == (1, 1) and (g.out_h, g.out_w) == x.shape[1:3]:
        return x.reshape(-1, c)  # a 1x1 stride-1 convolution is a plain GEMM on the input
    view = patches(pad_spatial(x, g, pad_value), g, filter_hw, stride, dilation)
    if c > TRANSPOSED_GATHER_MAX_CHANNELS:
        return view.reshape(n * g.out_h * g.out_w, filter_hw[0] * filter_hw[1] * c)
    _, oh, ow, kh, kw, _ = view.shape
    columns = np.empty((kh, kw, c, n, oh, ow), x.dtype)
    np.copyto(columns, view.transpose(3, 4, 5, 0, 1, 2), casting="unsafe")
    return columns.reshape(kh * kw * c, n * oh * ow).T


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


# CONV_2D's and DEPTHWISE_CONV_2D's shape rule: (input, filter, padding, stride, dilation) ->
# (window geometry, output shape), after LiteRT's Prepare checks.
WindowShapeRule = Callable[
    [Shape, Shape, str, tuple[int, int], tuple[int, int]], tuple[Geometry, Shape]
]


def window_shape(ctx: ShapeContext, rule: WindowShapeRule) -> tuple[Geometry, Shape]:
    """``rule`` on the node's input (0) and filter (1) shapes and its window options."""
    stride, dilation, padding, _ = window_options(ctx.options)
    return rule(ctx.shape(0), ctx.shape(1), padding, stride, dilation)


def conv_output_shapes(ctx: ShapeContext, rule: WindowShapeRule) -> list[Shape | None]:
    """A convolution's output shape by ``rule``, its optional bias checked against the output
    channels."""
    _, shape = window_shape(ctx, rule)
    check_bias(ctx, shape[3])
    return [shape]

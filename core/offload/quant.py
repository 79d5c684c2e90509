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

from offload._graph import Quantization
from offload._quant_add import AddParams, add_int8, add_params, add_reference
from offload._quant_fixed_point import (
    conv_multipliers,
    depthwise_vector_channels,
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_half_up,
    multiply_by_quantized_multiplier_int64,
    multiply_by_quantized_multiplier_lanes,
    multiply_by_real_multiplier,
    quantize_multiplier,
    quantize_multipliers,
    requantize,
    requantize_conv,
    requantize_depthwise,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
)
from offload._quant_limits import RescaleLimit, checked_log2, rescale_limit
from offload._quant_params import (
    QUANTIZED_TYPES,
    activation_range_quantized,
    channel_scales,
    dequantize,
    dtype_range,
    is_quantized,
    quantize,
    scale_zero_point,
    tflite_round,
    unusable_scale,
    wrap_int32,
)

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

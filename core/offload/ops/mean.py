"""MEAN: average over the given axes (TFLite ``reduce.cc``, EvalMean); float32 sums as LiteRT
does (:meth:`Mean._float_sum`), then divides by the count."""

from __future__ import annotations

import numpy as np

from offload.ops._eigen import column_sums
from offload.ops._quant import multiply_by_quantized_multiplier_lanes
from offload.ops._reduce import (
    ReduceKernel,
    mean_multiplier_for_count,
    reduced_shape,
    reduces_trailing,
    sequential,
)
from offload.ops._registry import register
from offload.ops._types import accepts
from offload.quant import scale_zero_point

# Channels optimized Mean4D handles per NEON step before its scalar leftover loop.
_MEAN_LANES = 16


@register
class Mean(ReduceKernel):
    op = "MEAN"
    max_version = 3
    types = accepts("FLOAT32 FLOAT16 INT32 INT64", "INT8 UINT8 INT16")

    def setup_reducer(self) -> None:
        self.quantized = self.input_tensor(0).dtype in (np.int8, np.uint8, np.int16)
        if self.quantized:
            self.in_scale, self.in_zp = scale_zero_point(self.inputs[0])
            self.out_scale, self.out_zp = scale_zero_point(self.outputs[0])
            # TFLite derives the multiplier in double from the float32 scales.
            real = float(self.in_scale) / float(self.out_scale)
            self.multiplier, self.shift = self.quantize_multiplier(real)

    def empty_value(self) -> object:
        # LiteRT writes quiet NaN, which is 0 for integer outputs.
        return np.nan if np.issubdtype(self.out_dtype, np.floating) else 0

    def reduce_none(self, x: np.ndarray) -> np.ndarray:
        return self.reduce(x, ()) if self.quantized else x.copy()

    def reduce(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        if not self.quantized:
            if x.dtype == np.float32:
                return self._float_sum(x, axes) / np.float32(self.reduced_count(x, axes))
            if np.issubdtype(x.dtype, np.floating):
                total = np.add.reduce(x, axis=axes, keepdims=True, dtype=np.float32)
                return total / np.float32(self.reduced_count(x, axes))
            # Integer mean: int64 sum, C++ division (truncates toward zero).
            total = np.add.reduce(x, axis=axes, keepdims=True, dtype=np.int64)
            n = self.reduced_count(x, axes)
            return np.sign(total) * (np.abs(total) // n)
        sums = np.add.reduce(x, axis=axes, keepdims=True, dtype=np.int64)
        n = self.reduced_count(x, axes)
        if (
            x.dtype != np.int16
            and self.keep_dims
            and x.ndim == 4
            and set(axes) == {1, 2}
            and len(axes) == 2
        ):
            return self.clamp(self._spatial_mean(sums, n))
        multiplier, shift = mean_multiplier_for_count(self.multiplier, self.shift, n)
        shifted = (sums - self.in_zp * n).astype(np.int32)
        return self.clamp(self.requantize_sum(shifted, multiplier, shift, self.out_zp))

    def _float_sum(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        """The sums LiteRT's float MEAN divides: Eigen's column sums when the reduced axes are
        the innermost ones (MeanGeneral's last-dimension path, after LiteRT merges adjacent
        axes), else its reference loop, which adds in input order."""
        if reduces_trailing(x.shape, axes):
            count = self.reduced_count(x, axes)
            rows = np.ascontiguousarray(x).reshape(-1, count)
            return column_sums(rows).reshape(reduced_shape(x.shape, axes, True))
        return sequential(np.add, x, axes)

    def _spatial_mean(self, sums: np.ndarray, n: int) -> np.ndarray:
        """LiteRT's dedicated 4-D mean over height and width (int8/uint8, optimized Mean4D):
        the zero point is folded into a rounded float bias and the raw sum is rescaled once,
        16 channels at a time in NEON lanes (on x86 through NEON_2_SSE, whose rounding shift
        sends halves up), the channels left over by the scalar reference (halves away from
        zero). One thread, LiteRT's default: more threads split the channels elsewhere."""
        temp = np.float32(self.in_zp) * self.in_scale / self.out_scale
        temp = temp + np.float32(0.5) if temp > 0 else temp - np.float32(0.5)
        bias = self.out_zp - int(temp)
        real = self.in_scale / (np.float32(n) * self.out_scale)
        multiplier, shift = self.quantize_multiplier(float(real))
        channels = sums.shape[-1]
        scaled = multiply_by_quantized_multiplier_lanes(
            sums, multiplier, shift, channels // _MEAN_LANES * _MEAN_LANES
        )
        return scaled + bias

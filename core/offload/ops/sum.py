"""SUM: sum over the given axes (TFLite ``reduce.cc``, EvalSum); float32 adds in LiteRT's
order (:func:`offload.ops._reduce.sequential`)."""

from __future__ import annotations

import numpy as np

from offload.ops._quant import tflite_round
from offload.ops._reduce import ReduceKernel, sequential
from offload.ops._registry import register
from offload.ops._types import accepts
from offload.quant import scale_zero_point


@register
class Sum(ReduceKernel):
    op = "SUM"
    max_version = 2
    types = accepts("FLOAT32 FLOAT16 INT32 INT64", "INT8 UINT8 INT16")

    def setup_reducer(self) -> None:
        self.quantized = self.input_tensor(0).dtype in (np.int8, np.uint8, np.int16)
        if self.quantized:
            in_scale, self.in_zp = scale_zero_point(self.inputs[0])
            out_scale, self.out_zp = scale_zero_point(self.outputs[0])
            self.scale = np.float32(in_scale / out_scale)

    def reduce_none(self, x: np.ndarray) -> np.ndarray:
        return self.reduce(x, ()) if self.quantized else x.copy()

    def reduce(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        if not self.quantized:
            if x.dtype == np.float32:
                return sequential(np.add, x, axes)
            if np.issubdtype(x.dtype, np.floating):
                return np.add.reduce(x, axis=axes, keepdims=True, dtype=np.float32)
            return np.add.reduce(x, axis=axes, keepdims=True, dtype=x.dtype)
        # LiteRT rescales quantized sums in float32 arithmetic, not fixed point.
        sums = np.add.reduce(x, axis=axes, keepdims=True, dtype=np.int64).astype(np.int32)
        n = np.float32(self.reduced_count(x, axes) if axes else 1)
        bias = np.float32(-self.in_zp) * self.scale * n
        scaled = sums.astype(np.float32) * self.scale + bias
        return self.clamp(tflite_round(scaled).astype(np.int64) + self.out_zp)

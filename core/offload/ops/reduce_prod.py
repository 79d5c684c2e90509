"""REDUCE_PROD: product over the given axes (TFLite ``reduce.cc``, EvalProd).

Quantized int8/int16 products are rescaled after every multiplication by
``input_scale / output_scale ** (1 / n)`` so the running product stays in range; the order of
the factors (input memory order) therefore matters and is kept.
"""

from __future__ import annotations

import numpy as np

from offload.ops._reduce import (
    ReduceKernel,
    multiply_by_quantized_multiplier_int64,
)
from offload.ops._registry import register
from offload.ops._types import accepts
from offload.quant import scale_zero_point


@register
class ReduceProd(ReduceKernel):
    op = "REDUCE_PROD"
    max_version = 2
    types = accepts("FLOAT32 INT8 INT16 INT32 INT64")

    def setup_reducer(self) -> None:
        self.quantized = self.is_quantized() and self.input_tensor(0).dtype in (np.int8, np.int16)
        if self.quantized:
            self.in_scale, self.in_zp = scale_zero_point(self.inputs[0])
            self.out_scale, self.out_zp = scale_zero_point(self.outputs[0])

    def empty_value(self) -> object:
        return 0 if self.quantized else 1

    def reduce(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        if not self.quantized:
            return np.multiply.reduce(x, axis=axes, keepdims=True, dtype=x.dtype)
        n = self.reduced_count(x, axes)
        real = float(self.in_scale) / float(self.out_scale) ** (1.0 / n)
        multiplier, shift = self.quantize_multiplier(real)
        kept = [a for a in range(x.ndim) if a not in axes]
        # Reduced axes last, in their original relative order: columns in input memory order.
        cols = np.transpose(x, kept + sorted(axes)).reshape(-1, n).astype(np.int64) - self.in_zp
        acc = cols[:, 0]
        for j in range(1, n):
            acc = multiply_by_quantized_multiplier_int64(acc * cols[:, j], multiplier, shift)
        out = multiply_by_quantized_multiplier_int64(acc, multiplier, shift) + self.out_zp
        shape = tuple(1 if a in axes else d for a, d in enumerate(x.shape))
        return self.clamp(out).reshape(shape)

"""SQUARED_DIFFERENCE: (a - b)^2.

int8: inputs shifted left by 7 bits onto twice the larger scale, differenced, squared, and
rescaled by ``(2 max_scale)^2 / (2^14 s_out)``.
"""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import BinaryOp, QuantizedFn, scale_zp
from offload.ops._quant import dtype_range, multiply_by_quantized_multiplier, quantize_multiplier
from offload.ops._registry import register
from offload.ops._types import accepts


def _squared_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = np.subtract(a, b)
    return d * d


@register
class SquaredDifference(BinaryOp):
    op = "SQUARED_DIFFERENCE"
    max_version = 2
    types = accepts("FLOAT32 FLOAT16 INT32", "INT8", data=(0, 1))
    fn = staticmethod(_squared_difference)

    def quantized(self) -> QuantizedFn | None:
        in1, in2, out = self.inputs[0], self.inputs[1], self.outputs[0]
        assert in1 is not None and in2 is not None
        if out.dtype != np.int8:
            return None
        (s1, z1), (s2, z2), (so, zo) = scale_zp(in1), scale_zp(in2), scale_zp(out)
        left_shift = 7
        twice_max = 2.0 * max(s1, s2)
        m1, sh1 = quantize_multiplier(s1 / twice_max)
        m2, sh2 = quantize_multiplier(s2 / twice_max)
        mo, sho = quantize_multiplier(twice_max * twice_max / ((1 << 2 * left_shift) * so))
        lo, hi = dtype_range(np.int8)

        def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            sa = multiply_by_quantized_multiplier((a.astype(np.int64) - z1) << left_shift, m1, sh1)
            sb = multiply_by_quantized_multiplier((b.astype(np.int64) - z2) << left_shift, m2, sh2)
            d = sa - sb
            return np.clip(multiply_by_quantized_multiplier(d * d, mo, sho) + zo, lo, hi).astype(
                np.int8
            )

        return run

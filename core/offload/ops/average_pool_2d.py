"""AVERAGE_POOL_2D: the mean over the in-bounds taps of each window; integer types round
the integer mean half away from zero, as TFLite does. Float windows are summed in filter
order, as LiteRT's optimized kernel adds them, and a sum that overflows ends at +-FLT_MAX
(:meth:`~offload.ops._pool.PoolKernel.finish`).

Integer windows are summed in floating point, exact while a window's sum stays below 2**24
(float32, every 8-bit window up to 65793 taps) or 2**53 (float64), and the rounded quotient
``trunc((sum +- count // 2) / count)`` is exact there too: a quotient within one part in
2**24 of a whole number is that number.
"""

from __future__ import annotations

import numpy as np

from offload.ops._pool import PoolKernel
from offload.ops._quant import dtype_range
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class AveragePool2D(PoolKernel):
    op = "AVERAGE_POOL_2D"
    max_version = 3
    types = accepts("FLOAT32 FLOAT16 INT8 UINT8 INT16")

    def _run(self, *inputs: np.ndarray | None) -> np.ndarray:
        x = self.required(inputs[0], "input 0")
        floating = np.issubdtype(x.dtype, np.floating)
        acc_dtype: type[np.floating] = np.float32
        if not floating:
            lo, hi = dtype_range(x.dtype)
            if self.kernel_hw[0] * self.kernel_hw[1] * max(-lo, hi) >= 2**24:
                acc_dtype = np.float64
        view, g = self.windows(x.astype(acc_dtype, copy=False), 0)
        count = self.tap_counts(x.shape[1:3], g).astype(acc_dtype)
        total = np.zeros((x.shape[0], g.out_h, g.out_w, x.shape[3]), acc_dtype)
        if floating:
            # A float sum may overflow (LiteRT's does too): finish clamps inf to +-FLT_MAX.
            with np.errstate(over="ignore", invalid="ignore"):
                for tap in self.taps(view):
                    total += tap
                return self.finish(total / count)
        for tap in self.taps(view):
            total += tap
        # (acc +- count/2) / count with C's truncating division (a zero sum stays zero).
        total += np.copysign(np.floor(count / 2), total)
        total /= count
        return self.finish(np.trunc(total, out=total))

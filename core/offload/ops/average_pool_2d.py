"""AVERAGE_POOL_2D: the mean over the in-bounds taps of each window; integer types round
the integer mean half away from zero, as TFLite does."""

from __future__ import annotations

import numpy as np

from offload.ops._pool import PoolKernel
from offload.ops._registry import register


@register
class AveragePool2D(PoolKernel):
    op = "AVERAGE_POOL_2D"
    max_version = 3

    def run(self, *inputs: np.ndarray | None) -> np.ndarray:
        x = inputs[0]
        floating = np.issubdtype(x.dtype, np.floating)
        acc_dtype = np.float32 if floating else np.int64
        view, g = self.windows(x.astype(acc_dtype, copy=False), 0)
        count = self.tap_counts(x.shape[1:3], g)
        total = np.zeros((x.shape[0], g.out_h, g.out_w, x.shape[3]), acc_dtype)
        for tap in self.taps(view):
            total += tap
        if floating:
            return self.finish(total / count.astype(np.float32))
        # (acc ± count/2) / count with C's truncating division.
        half = count // 2
        num = np.where(total > 0, total + half, total - half)
        return self.finish(np.sign(num) * (np.abs(num) // count))

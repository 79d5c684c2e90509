"""L2_POOL_2D (float only): sqrt of the mean square over the in-bounds taps of each window."""

from __future__ import annotations

import numpy as np

from offload.ops._pool import PoolKernel
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class L2Pool2D(PoolKernel):
    op = "L2_POOL_2D"
    max_version = 1
    types = accepts("FLOAT32")

    def _run(self, *inputs: np.ndarray | None) -> np.ndarray:
        x = np.asarray(inputs[0], np.float32)
        view, g = self.windows(x, 0)
        count = self.tap_counts(x.shape[1:3], g).astype(np.float32)
        total = np.zeros((x.shape[0], g.out_h, g.out_w, x.shape[3]), np.float32)
        for tap in self.taps(view):
            total += tap * tap
        return self.finish(np.sqrt(total / count))

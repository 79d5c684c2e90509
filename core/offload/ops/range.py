"""RANGE: ``start, start + delta, ...`` up to (not including) ``limit``. Float values are
accumulated one addition at a time, like TFLite, rather than computed as start + i * delta."""

from __future__ import annotations

import math

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register


@register
class Range(OpKernel):
    op = "RANGE"
    max_version = 2

    def run(self, start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> np.ndarray:
        dtype = self.outputs[0].dtype
        s, lim, d = (np.asarray(v, dtype).reshape(-1)[0] for v in (start, limit, delta))
        if d == 0 or (s < lim and d < 0) or (s > lim and d > 0):
            raise ValueError(f"cannot reach limit {lim} from start {s} with delta {d}")
        if np.issubdtype(dtype, np.integer):
            count = (abs(int(lim) - int(s)) + abs(int(d)) - 1) // abs(int(d))
            return (int(s) + int(d) * np.arange(count, dtype=np.int64)).astype(dtype)
        count = math.ceil(abs((lim - s) / d))
        steps = np.full(count, d, dtype=dtype)
        if count:
            steps[0] = s
        # np.add.accumulate is sequential, so it repeats TFLite's running float32 sum.
        return np.add.accumulate(steps, dtype=dtype)

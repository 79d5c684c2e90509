"""MAX_POOL_2D: the largest in-bounds value of each window (padding never wins)."""

from __future__ import annotations

import numpy as np

from offload.ops._pool import PoolKernel
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class MaxPool2D(PoolKernel):
    op = "MAX_POOL_2D"
    max_version = 3
    types = accepts("FLOAT32 INT8 UINT8 INT16")

    def run(self, *inputs: np.ndarray | None) -> np.ndarray:
        x = self.required(inputs[0], "input 0")
        lowest = -np.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
        view, _ = self.windows(x, lowest)
        out: np.ndarray | None = None
        for tap in self.taps(view):
            out = tap.copy() if out is None else np.maximum(out, tap, out=out)
        # The shape rule holds filters to at least one tap.
        return self.finish(self.required(out, "a pooling window of at least one tap"))

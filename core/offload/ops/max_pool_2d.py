"""MAX_POOL_2D: the largest in-bounds value of each window (padding never wins).

Float follows LiteRT's optimized kernel (an Eigen ``cwiseMax`` into a running maximum that
starts at lowest), so a NaN tap is skipped, an all-NaN window gives lowest, and of 0.0 and
-0.0 the first in window order wins.
"""

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

    def _run(self, *inputs: np.ndarray | None) -> np.ndarray:
        x = self.required(inputs[0], "input 0")
        out = self._max(x)
        # np.maximum lets a NaN through, and a NaN tap makes its whole window NaN, so a NaN
        # anywhere in the output is the only sign that the NaN-skipping pass is needed. The
        # check runs on the output, a quarter of the input at stride 2: it costs about 1% of
        # a 3x3 stride-2 pool, 3-4% of a stride-1 or 2x2 one (the input's isnan would cost
        # 10-30%). As -inf a NaN loses to every tap, and a window of nothing else clamps to
        # lowest in finish(), LiteRT's answer for it.
        if out.dtype.kind == "f" and out.size and np.isnan(out.max()):
            out = self._max(np.where(np.isnan(x), x.dtype.type(-np.inf), x))
        return self.finish(out)

    def _max(self, x: np.ndarray) -> np.ndarray:
        lowest = -np.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
        view, _ = self.windows(x, lowest)
        out: np.ndarray | None = None
        for tap in self.taps(view):
            # The running maximum second: on a tie np.maximum returns its second operand, so
            # of two zeros the earlier tap's sign stays, as in LiteRT.
            out = tap.copy() if out is None else np.maximum(tap, out, out=out)
        # The shape rule holds filters to at least one tap.
        return self.required(out, "a pooling window of at least one tap")

"""ADD_N: the elementwise sum of all inputs (same shape), accumulated left to right in the
output dtype."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register


@register
class AddN(OpKernel):
    op = "ADD_N"

    def run(self, *xs: np.ndarray | None) -> np.ndarray:
        dtype = self.outputs[0].dtype
        total = np.array(xs[0], dtype=dtype, copy=True)
        for x in xs[1:]:
            np.add(total, np.asarray(x, dtype), out=total)
        return total

"""WHERE (one input): the coordinates of the true (non-zero) elements, one row each, in
row-major order, as int64."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register


@register
class Where(OpKernel):
    op = "WHERE"
    max_version = 2

    def run(self, condition: np.ndarray) -> np.ndarray:
        return np.argwhere(condition).astype(self.outputs[0].dtype, copy=False)

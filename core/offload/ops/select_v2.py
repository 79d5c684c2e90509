"""SELECT_V2 (tf.where v2): pick x where condition else y, all three broadcast together."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register


@register
class SelectV2(OpKernel):
    op = "SELECT_V2"
    max_version = 2

    def run(self, cond: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:  # type: ignore[override]
        return np.where(np.asarray(cond, np.bool_), x, y).astype(self.outputs[0].dtype, copy=False)

"""RANK: the input's number of dimensions as an int32 scalar."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register


@register
class Rank(OpKernel):
    op = "RANK"
    max_version = 1

    def run(self, x: np.ndarray) -> np.ndarray:
        return np.array(x.ndim, dtype=self.outputs[0].dtype)

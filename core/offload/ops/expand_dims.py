"""EXPAND_DIMS: insert a size-1 dimension at ``axis`` (negative counts from rank + 1)."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register
from offload.ops._shape import normalize_axis, scalar_int


@register
class ExpandDims(OpKernel):
    op = "EXPAND_DIMS"
    max_version = 1

    def run(self, x: np.ndarray, axis: np.ndarray) -> np.ndarray:
        a = normalize_axis(scalar_int(axis), x.ndim + 1)
        return x.reshape(x.shape[:a] + (1,) + x.shape[a:])

"""SPLIT_V: cut a tensor along an axis into parts of the given sizes (one may be -1)."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register
from offload.ops._shape import int_list, normalize_axis, scalar_int


@register
class SplitV(OpKernel):
    op = "SPLIT_V"
    max_version = 3

    def run(self, x: np.ndarray, size_splits: np.ndarray, axis: np.ndarray) -> list[np.ndarray]:
        a = normalize_axis(scalar_int(axis), x.ndim)
        sizes = int_list(size_splits)
        if sizes.count(-1) > 1:
            raise ValueError(f"expected at most one -1 in size_splits, found {sizes}")
        known = sum(s for s in sizes if s != -1)
        if -1 in sizes:
            sizes[sizes.index(-1)] = x.shape[a] - known
        if sum(sizes) != x.shape[a] or min(sizes, default=0) < 0:
            raise ValueError(f"size_splits {sizes} do not add up to dimension {a} of {x.shape}")
        return np.split(x, np.cumsum(sizes)[:-1], axis=a)

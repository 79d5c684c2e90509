"""ONE_HOT: ``on_value`` where an index equals the position along the new ``axis`` (of size
``depth``), ``off_value`` elsewhere; out-of-range indices give an all-off row."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register
from offload.ops._shape import normalize_axis, scalar_int


@register
class OneHot(OpKernel):
    op = "ONE_HOT"
    max_version = 1

    def run(
        self, indices: np.ndarray, depth: np.ndarray, on: np.ndarray, off: np.ndarray
    ) -> np.ndarray:
        axis = int(self.options.get("axis", -1))
        axis = indices.ndim if axis == -1 else normalize_axis(axis, indices.ndim + 1)
        n = scalar_int(depth)
        shape = [1] * (indices.ndim + 1)
        shape[axis] = n
        hot = np.expand_dims(indices.astype(np.int64), axis) == np.arange(n).reshape(shape)
        dtype = self.outputs[0].dtype
        return np.where(hot, on.reshape(-1)[0], off.reshape(-1)[0]).astype(dtype, copy=False)

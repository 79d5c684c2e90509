"""GATHER: pick slices along ``axis`` by index, with leading ``batch_dims`` shared between the
input and the indices. Negative or out-of-range indices are errors, as in TFLite."""

from __future__ import annotations

import math

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register
from offload.ops._shape import check_index_range, normalize_axis


@register
class Gather(OpKernel):
    op = "GATHER"
    max_version = 8

    def run(self, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
        axis = normalize_axis(int(self.options.get("axis", 0)), x.ndim)
        batch_dims = int(self.options.get("batch_dims", 0))
        if batch_dims < 0:
            batch_dims += positions.ndim
        if not 0 <= batch_dims <= axis or x.shape[:batch_dims] != positions.shape[:batch_dims]:
            raise ValueError(
                f"batch_dims {batch_dims} does not fit axis {axis}, input {x.shape} and "
                f"positions {positions.shape}"
            )
        check_index_range(positions, x.shape[axis], "gather positions")
        if batch_dims == 0:
            return np.asarray(np.take(x, positions.astype(np.intp), axis=axis))
        # Flatten to (batch, outer, axis, inner) and positions to (batch, n): one fancy index.
        batch = math.prod(x.shape[:batch_dims])
        outer = math.prod(x.shape[batch_dims:axis])
        flat = x.reshape(batch, outer, x.shape[axis], -1)
        pos = positions.reshape(batch, 1, -1).astype(np.intp)
        picked = flat[np.arange(batch)[:, None, None], np.arange(outer)[None, :, None], pos]
        out_shape = x.shape[:axis] + positions.shape[batch_dims:] + x.shape[axis + 1 :]
        return picked.reshape(out_shape)

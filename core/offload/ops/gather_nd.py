"""GATHER_ND: index the leading ``indices.shape[-1]`` dimensions of ``params`` with each row
of ``indices``; out-of-range indices are errors, as in TFLite."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register
from offload.ops._shape import check_index_range


@register
class GatherNd(OpKernel):
    op = "GATHER_ND"
    max_version = 6

    def run(self, params: np.ndarray, indices: np.ndarray) -> np.ndarray:
        nd = indices.shape[-1] if indices.ndim else 0
        if nd > params.ndim:
            raise ValueError(f"index depth {nd} exceeds the rank of params {params.shape}")
        for d in range(nd):
            check_index_range(indices[..., d], params.shape[d], f"gather_nd index {d}")
        coords = tuple(np.moveaxis(indices.astype(np.intp), -1, 0))
        return params[coords].reshape(indices.shape[:-1] + params.shape[nd:])

"""TRANSPOSE: permute dimensions by ``perm`` (negative entries count from the end)."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register
from offload.ops._shape import int_list, normalize_axis


@register
class Transpose(OpKernel):
    op = "TRANSPOSE"
    max_version = 9

    def run(self, x: np.ndarray, perm: np.ndarray) -> np.ndarray:
        axes = [normalize_axis(p, x.ndim, "perm entry") for p in int_list(perm)]
        if len(axes) != x.ndim:
            raise ValueError(f"expected a perm of {x.ndim} entries, found {axes}")
        return x.transpose(axes)

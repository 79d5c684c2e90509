"""SLICE: ``size`` elements from ``begin`` in every dimension (size -1: to the end)."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register
from offload.ops._shape import int_list


@register
class Slice(OpKernel):
    op = "SLICE"
    max_version = 8

    def run(self, x: np.ndarray, begin: np.ndarray, size: np.ndarray) -> np.ndarray:
        index = []
        for dim, b, s in zip(x.shape, int_list(begin), int_list(size)):
            if s == -1:
                s = dim - b
            if b < 0 or s < 0 or b + s > dim:
                raise ValueError(f"invalid begin {b} and size {s} for a dimension of {dim}")
            index.append(slice(b, b + s))
        return x[tuple(index)]

"""SPLIT: cut a tensor into ``num_splits`` equal parts along a (runtime) axis."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register
from offload.ops._shape import normalize_axis, scalar_int


@register
class Split(OpKernel):
    op = "SPLIT"
    max_version = 5

    def run(self, axis: np.ndarray, x: np.ndarray) -> list[np.ndarray]:
        a = normalize_axis(scalar_int(axis), x.ndim)
        parts = len(self.outputs)
        if x.shape[a] % parts:
            raise ValueError(f"cannot split dimension {a} of {x.shape} evenly into {parts}")
        return np.split(x, parts, axis=a)

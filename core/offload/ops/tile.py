"""TILE: repeat the whole tensor ``multiples[i]`` times along each dimension."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register
from offload.ops._shape import int_list


@register
class Tile(OpKernel):
    op = "TILE"
    max_version = 3

    def run(self, x: np.ndarray, multiples: np.ndarray) -> np.ndarray:
        reps = int_list(multiples)
        if len(reps) != x.ndim or min(reps, default=0) < 0:
            raise ValueError(f"expected {x.ndim} non-negative multiples, found {reps}")
        return np.tile(x, reps)

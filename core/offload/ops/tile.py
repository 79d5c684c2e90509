"""TILE: repeat the whole tensor ``multiples[i]`` times along each dimension."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._shape import int_list
from offload.ops._types import accepts


def tile_multiples(rank: int, multiples: np.ndarray) -> list[int]:
    """One non-negative repeat count per input dimension."""
    reps = int_list(multiples)
    check_shape(
        len(reps) == rank and min(reps, default=0) >= 0,
        f"expected {rank} non-negative multiples, found {reps}",
    )
    return reps


@register
class Tile(OpKernel):
    op = "TILE"
    max_version = 3
    types = accepts(
        "FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL FLOAT64 COMPLEX64 UINT16 UINT32"
    )

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        x, multiples = ctx.shape(0), ctx.constant(1)
        if multiples is None:
            return [None]
        return [tuple(d * r for d, r in zip(x, tile_multiples(len(x), multiples)))]

    def _run(self, x: np.ndarray, multiples: np.ndarray) -> np.ndarray:
        return np.tile(x, tile_multiples(x.ndim, multiples))

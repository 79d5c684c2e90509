"""TRANSPOSE: permute dimensions by ``perm`` (negative entries count from the end)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._shape import int_list, normalize_axis
from offload.ops._types import accepts


def permutation(perm: np.ndarray, rank: int) -> list[int]:
    """``perm`` with negative entries resolved; it must name every axis once."""
    entries = int_list(perm)
    axes = [normalize_axis(p, rank, "perm entry") for p in entries]
    check_shape(
        sorted(axes) == list(range(rank)),
        f"expected a permutation of the {rank} axes, found {entries}",
    )
    return axes


@register
class Transpose(OpKernel):
    op = "TRANSPOSE"
    max_version = 9
    types = accepts(
        "FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL INT4 FLOAT64 COMPLEX64 UINT16 UINT32"
    )

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        x, perm = ctx.shape(0), ctx.constant(1)
        if perm is None:
            return [None]
        return [tuple(x[a] for a in permutation(perm, len(x)))]

    def _run(self, x: np.ndarray, perm: np.ndarray) -> np.ndarray:
        return x.transpose(permutation(perm, x.ndim))

"""SLICE: ``size`` elements from ``begin`` in every dimension (size -1: to the end)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._shape import int_list
from offload.ops._types import accepts


def slice_bounds(shape: Shape, begin: Sequence[int], size: Sequence[int]) -> list[slice]:
    """One slice per dimension; begin and size must name every dimension, as in LiteRT."""
    check_shape(
        len(begin) == len(size) == len(shape),
        f"expected begin and size of {len(shape)} entries, found {list(begin)} and {list(size)}",
    )
    bounds = []
    for dim, b, s in zip(shape, begin, size):
        if s == -1:
            s = dim - b
        check_shape(
            0 <= b and 0 <= s and b + s <= dim,
            f"expected begin >= 0 and begin + size <= {dim}, found begin {b} and size {s}",
        )
        bounds.append(slice(b, b + s))
    return bounds


@register
class Slice(OpKernel):
    op = "SLICE"
    max_version = 8
    types = accepts(
        "FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL INT4 FLOAT64 COMPLEX64 UINT16 UINT32"
    )

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        x, begin, size = ctx.shape(0), ctx.constant(1), ctx.constant(2)
        if size is None:
            return [None]
        sizes = int_list(size)
        if begin is not None:
            begins = int_list(begin)
        elif -1 in sizes:
            return [None]  # "to the end" depends on the runtime begin
        else:
            # Without -1 the sizes are the shape whatever the begin; zeros check they fit.
            begins = [0] * math.prod(ctx.shape(1))
        return [tuple(s.stop - s.start for s in slice_bounds(x, begins, sizes))]

    def _run(self, x: np.ndarray, begin: np.ndarray, size: np.ndarray) -> np.ndarray:
        return x[tuple(slice_bounds(x.shape, int_list(begin), int_list(size)))]

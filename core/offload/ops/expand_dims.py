"""EXPAND_DIMS: insert a size-1 dimension at ``axis`` (negative counts from rank + 1)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._registry import register
from offload.ops._shape import check_one_value, normalize_axis, scalar_int
from offload.ops._types import ANY_STORED, accepts


def expanded_shape(shape: Shape, axis: np.ndarray) -> Shape:
    a = normalize_axis(scalar_int(axis), len(shape) + 1)
    return shape[:a] + (1,) + shape[a:]


@register
class ExpandDims(OpKernel):
    op = "EXPAND_DIMS"
    max_version = 1
    types = accepts(ANY_STORED)

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        shape = ctx.shape(0)
        check_one_value(ctx.shape(1), "axis")
        axis = ctx.constant(1)
        return [None if axis is None else expanded_shape(shape, axis)]

    def _run(self, x: np.ndarray, axis: np.ndarray) -> np.ndarray:
        return x.reshape(expanded_shape(x.shape, axis))

"""ARG_MAX: index of the largest value along one axis (first one on ties)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._shape import check_one_value, normalize_axis, scalar_int
from offload.ops._types import accepts, one_of


def arg_axis(axis: np.ndarray, ndim: int) -> int:
    """The single axis of ARG_MAX/ARG_MIN, counted from the end when negative."""
    return normalize_axis(scalar_int(axis), ndim)


def arg_output_shapes(ctx: ShapeContext) -> list[Shape | None]:
    """ARG_MAX/ARG_MIN: the input's shape without the reduced axis (None for a runtime axis)."""
    shape = ctx.shape(0)
    check_shape(len(shape) >= 1, "expected an input of rank >= 1, found a scalar")
    check_one_value(ctx.shape(1), "axis")
    axis = ctx.constant(1)
    if axis is None:
        return [None]
    a = arg_axis(axis, len(shape))
    return [shape[:a] + shape[a + 1 :]]


@register
class ArgMax(OpKernel):
    op = "ARG_MAX"
    max_version = 3
    types = accepts("FLOAT32 INT8 UINT8 INT32 BOOL", output=one_of("INT32 INT64"))

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return arg_output_shapes(ctx)

    def _run(self, x: np.ndarray, axis: np.ndarray) -> np.ndarray:
        # np.asarray: numpy gives a scalar, not an array, when x is 1-D.
        return np.asarray(np.argmax(x, axis=arg_axis(axis, x.ndim)), self.outputs[0].dtype)

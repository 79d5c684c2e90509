"""ARG_MAX and ARG_MIN: the index of the largest or smallest value along one axis, one kernel
in LiteRT (arg_min_max.cc) and one base here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._shape import check_one_value, normalize_axis, not_scalar, scalar_int
from offload.ops._types import accepts, one_of

__all__ = ["ArgReduceOp", "arg_axis"]


def arg_axis(axis: np.ndarray, ndim: int) -> int:
    """The single axis of ARG_MAX/ARG_MIN, counted from the end when negative."""
    return normalize_axis(scalar_int(axis), ndim)


class ArgReduceOp(OpKernel):
    """The index ``pick`` (``np.argmax`` or ``np.argmin``: the first one on ties, as LiteRT)
    finds along the axis of input 1; the output drops that axis."""

    max_version = 3
    types = accepts("FLOAT32 INT8 UINT8 INT32 BOOL", output=one_of("INT32 INT64"))
    # Subclasses assign ``staticmethod(np.argmax)`` or ``staticmethod(np.argmin)``, which
    # give a numpy scalar, not an array, for a 1-D input.
    pick: ClassVar[Callable[..., Any]]

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        """The input's shape without the reduced axis (None for a runtime axis)."""
        shape = not_scalar(ctx.shape(0))
        check_one_value(ctx.shape(1), "axis")
        axis = ctx.constant(1)
        if axis is None:
            return [None]
        a = arg_axis(axis, len(shape))
        return [shape[:a] + shape[a + 1 :]]

    def _run(self, x: np.ndarray, axis: np.ndarray) -> np.ndarray:
        # np.asarray: numpy gives a scalar, not an array, when x is 1-D.
        picked = type(self).pick(x, axis=arg_axis(axis, x.ndim))
        return np.asarray(picked, self.outputs[0].dtype)

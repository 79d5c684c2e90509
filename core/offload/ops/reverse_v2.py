"""REVERSE_V2: flip the tensor along the given axes (TFLite accepts only contiguous axes)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._shape import int_list, normalize_axis
from offload.ops._types import accepts


def reversed_axes(axis: np.ndarray, rank: int) -> tuple[int, ...]:
    """The axes to flip, in order; LiteRT refuses gaps and repeats alike (its kernel flips
    one contiguous block of axes)."""
    axes = sorted(normalize_axis(a, rank) for a in int_list(axis))
    check_shape(
        not axes or axes == list(range(axes[0], axes[0] + len(axes))),
        f"expected distinct contiguous axes (as LiteRT), found {axes}",
    )
    return tuple(axes)


@register
class ReverseV2(OpKernel):
    op = "REVERSE_V2"
    max_version = 4
    types = accepts("FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL")

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        x, axis = ctx.shape(0), ctx.constant(1)
        if axis is not None:
            reversed_axes(axis, len(x))
        return [x]

    def _run(self, x: np.ndarray, axis: np.ndarray) -> np.ndarray:
        axes = reversed_axes(axis, x.ndim)
        return np.flip(x, axis=axes) if axes else x

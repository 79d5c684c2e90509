"""ONE_HOT: ``on_value`` where an index equals the position along the new ``axis`` (of size
``depth``), ``off_value`` elsewhere; out-of-range indices give an all-off row."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._shape import check_one_value, scalar_int
from offload.ops._types import accepts, one_of


def one_hot_axis(axis: int, rank: int) -> int:
    """Where the new axis goes among rank + 1: -1 means last, other negatives are errors (as
    in LiteRT, which only special-cases -1)."""
    check_shape(-1 <= axis <= rank, f"expected axis -1 or in [0, {rank}], found {axis}")
    return rank if axis == -1 else axis


def one_hot_shape(indices: Shape, axis: int, depth: np.ndarray) -> tuple[int, Shape]:
    """(resolved axis, output shape): ``depth`` inserted into the indices' shape at the axis."""
    n = scalar_int(depth)
    # A crafted negative depth must fail here, before anything is allocated.
    check_shape(n >= 0, f"expected a depth >= 0, found {n}")
    a = one_hot_axis(axis, len(indices))
    return a, indices[:a] + (n,) + indices[a:]


@register
class OneHot(OpKernel):
    op = "ONE_HOT"
    max_version = 1
    types = accepts(
        "FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL",
        data=(2, 3),
        others={0: one_of("INT32 INT64")},
    )

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        check_shape(len(ctx.shapes) == 4, f"expected 4 inputs, found {len(ctx.shapes)}")
        indices = ctx.shape(0)
        axis = int(ctx.options.get("axis", -1))
        one_hot_axis(axis, len(indices))
        for position, what in ((1, "depth"), (2, "on_value"), (3, "off_value")):
            check_one_value(ctx.shape(position), what)
        depth = ctx.constant(1)
        return [None if depth is None else one_hot_shape(indices, axis, depth)[1]]

    def _run(
        self, indices: np.ndarray, depth: np.ndarray, on: np.ndarray, off: np.ndarray
    ) -> np.ndarray:
        axis, shape = one_hot_shape(indices.shape, int(self.options.get("axis", -1)), depth)
        grid = [1] * len(shape)
        grid[axis] = shape[axis]
        hot = np.expand_dims(indices.astype(np.int64), axis) == np.arange(shape[axis]).reshape(grid)
        dtype = self.outputs[0].dtype
        return np.where(hot, on.reshape(-1)[0], off.reshape(-1)[0]).astype(dtype, copy=False)

"""SELECT (tf.where v1): pick x where condition else y. x and y have one shape; the condition
has that shape, or is a scalar, or is a vector choosing whole slices along the first axis."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._select import SelectOp


@register
class Select(SelectOp):
    op = "SELECT"
    max_version = 4

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        cond, x, y = ctx.shape(0), ctx.shape(1), ctx.shape(2)
        check_shape(x == y, f"expected x and y of one shape, found {list(x)} and {list(y)}")
        check_shape(
            cond == x or cond == () or (len(cond) == 1 and len(x) >= 1 and cond[0] == x[0]),
            f"expected a condition of shape {list(x)} or a scalar"
            + (f" or of shape [{x[0]}]" if x else "")
            + f", found {list(cond)}",
        )
        return [x]

    def condition(self, cond: np.ndarray, rank: int) -> np.ndarray:
        if cond.ndim == 1 and rank > 1:
            # Rank-one condition selects rows, not trailing elements as numpy would.
            return cond.reshape(cond.shape + (1,) * (rank - 1))
        return cond

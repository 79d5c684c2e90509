"""WHERE (one input): the coordinates of the true (non-zero) elements, one row each, in
row-major order, as int64."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._types import accepts, one_of


def _check_rank(shape: Shape) -> None:
    # LiteRT refuses a scalar condition, which has no coordinates to list.
    check_shape(len(shape) >= 1, "expected a condition of rank >= 1, found a scalar")


@register
class Where(OpKernel):
    op = "WHERE"
    max_version = 2
    types = accepts("FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL", output=one_of("INT64"))

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        shape = ctx.shape(0)
        _check_rank(shape)
        condition = ctx.constant(0)
        # The row count is the number of true elements: known only for a constant condition.
        if condition is None:
            return [None]
        return [(int(np.count_nonzero(condition)), len(shape))]

    def _run(self, condition: np.ndarray) -> np.ndarray:
        _check_rank(condition.shape)
        return np.argwhere(condition).astype(self.outputs[0].dtype, copy=False)

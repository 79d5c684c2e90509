"""SELECT (tf.where v1): pick x where condition else y. x and y have one shape; the condition
has that shape, or is a scalar, or is a vector choosing whole slices along the first axis."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._types import accepts, one_of


@register
class Select(OpKernel):
    op = "SELECT"
    max_version = 4
    types = accepts(
        "FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL FLOAT64 COMPLEX64 UINT16 UINT32",
        data=(1, 2),
        others={0: one_of("BOOL")},
    )

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

    def _run(self, cond: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        cond = np.asarray(cond, np.bool_)
        x, y = np.asarray(x), np.asarray(y)
        if cond.ndim == 1 and x.ndim > 1:
            # Rank-one condition selects rows, not trailing elements as numpy would.
            cond = cond.reshape(cond.shape + (1,) * (x.ndim - 1))
        return np.where(cond, x, y).astype(self.outputs[0].dtype, copy=False)

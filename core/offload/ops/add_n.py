"""ADD_N: the elementwise sum of all inputs (same shape), accumulated left to right in the
output dtype; a float sum is clamped to [lowest, max] after every addition, as LiteRT's
kernel clamps each partial sum (3e38 + 3e38 - 3e38 is 3.4e38 - 3e38, not inf)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._elementwise import float_clamp
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class AddN(OpKernel):
    op = "ADD_N"
    types = accepts("FLOAT32 INT32", data="all")

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        check_shape(len(ctx.shapes) >= 2, f"expected at least 2 inputs, found {len(ctx.shapes)}")
        shapes = [ctx.shape(i) for i in range(len(ctx.shapes))]
        # LiteRT's HaveSameShapes: no broadcasting between the summands.
        check_shape(
            all(s == shapes[0] for s in shapes),
            f"expected inputs of one shape, found {[list(s) for s in shapes]}",
        )
        return [shapes[0]]

    def _run(self, *xs: np.ndarray | None) -> np.ndarray:
        dtype = self.outputs[0].dtype
        total = np.array(xs[0], dtype=dtype, copy=True)
        with np.errstate(over="ignore", invalid="ignore"):
            for x in xs[1:]:
                np.add(total, np.asarray(x, dtype), out=total)
                if dtype.kind == "f":
                    float_clamp(total)
        return total

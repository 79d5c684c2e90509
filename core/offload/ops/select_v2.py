"""SELECT_V2 (tf.where v2): pick x where condition else y, all three broadcast together."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import Shape, ShapeContext
from offload.ops._registry import register
from offload.ops._select import SelectOp


@register
class SelectV2(SelectOp):
    op = "SELECT_V2"
    max_version = 2

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        shapes = [ctx.shape(i) for i in range(3)]
        try:
            return [tuple(np.broadcast_shapes(*shapes))]
        except ValueError:
            found = ", ".join(str(list(s)) for s in shapes)
            raise ValueError(f"expected shapes that broadcast together, found {found}") from None

"""SELECT_V2 (tf.where v2): pick x where condition else y, all three broadcast together."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._registry import register
from offload.ops._types import accepts, one_of


@register
class SelectV2(OpKernel):
    op = "SELECT_V2"
    max_version = 2
    types = accepts(
        "FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL FLOAT64 COMPLEX64 UINT16 UINT32",
        data=(1, 2),
        others={0: one_of("BOOL")},
    )

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        shapes = [ctx.shape(i) for i in range(3)]
        try:
            return [tuple(np.broadcast_shapes(*shapes))]
        except ValueError:
            found = ", ".join(str(list(s)) for s in shapes)
            raise ValueError(f"expected shapes that broadcast together, found {found}") from None

    def _run(self, cond: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.where(np.asarray(cond, np.bool_), x, y).astype(self.outputs[0].dtype, copy=False)

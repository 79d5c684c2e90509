"""ZEROS_LIKE: zeros of the input's shape, in the output's dtype."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class ZerosLike(OpKernel):
    op = "ZEROS_LIKE"
    types = accepts("FLOAT32 INT32 INT64")

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return [ctx.shape(0)]

    def _run(self, x: np.ndarray) -> np.ndarray:
        return np.zeros(np.shape(x), self.outputs[0].dtype)

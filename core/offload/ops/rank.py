"""RANK: the input's number of dimensions as an int32 scalar."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._registry import register


@register
class Rank(OpKernel):
    op = "RANK"
    max_version = 1

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        ctx.shape(0)  # only the rank is read, but a missing input is still an error
        return [()]

    def run(self, x: np.ndarray) -> np.ndarray:
        return np.array(x.ndim, dtype=self.outputs[0].dtype)

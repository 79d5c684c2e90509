"""RANK: the input's number of dimensions as an int32 scalar."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._registry import register
from offload.ops._types import accepts, one_of


@register
class Rank(OpKernel):
    op = "RANK"
    max_version = 1
    types = accepts(
        "FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL INT4 FLOAT64 COMPLEX64 UINT16 UINT32",
        output=one_of("INT32"),
    )

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        ctx.shape(0)  # only the rank is read, but a missing input is still an error
        return [()]

    def _run(self, x: np.ndarray) -> np.ndarray:
        return np.array(x.ndim, dtype=self.outputs[0].dtype)

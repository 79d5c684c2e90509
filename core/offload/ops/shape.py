"""SHAPE: the input's dimensions as a 1-D int32 or int64 tensor (``out_type``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, ShapeContext
from offload.ops._registry import register
from offload.ops._types import accepts, one_of


@register
class Shape(OpKernel):
    op = "SHAPE"
    max_version = 1
    types = accepts(
        "FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL INT4 FLOAT64 COMPLEX64 UINT16 UINT32",
        output=one_of("INT32 INT64"),
    )

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[tuple[int, ...] | None]:
        return [(len(ctx.shape(0)),)]

    def _run(self, x: np.ndarray) -> np.ndarray:
        return np.array(x.shape, dtype=self.outputs[0].dtype)

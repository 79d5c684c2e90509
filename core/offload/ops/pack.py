"""PACK: stack ``values_count`` tensors of one shape along a new ``axis``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._shape import normalize_axis
from offload.ops._types import accepts


@register
class Pack(OpKernel):
    op = "PACK"
    max_version = 5
    types = accepts("FLOAT32 INT8 UINT8 INT16 INT32 INT64 UINT32", data="all")

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        shapes = [ctx.shape(i) for i in range(len(ctx.shapes))]
        count = int(ctx.options.get("values_count", 0))
        check_shape(
            count == len(shapes) and count > 0,
            f"expected values_count={count} inputs (at least one), found {len(shapes)}",
        )
        first = shapes[0]
        for i, shape in enumerate(shapes[1:], 1):
            check_shape(
                shape == first,
                f"expected every input of shape {list(first)}, found {list(shape)} at input {i}",
            )
        axis = normalize_axis(int(ctx.options.get("axis", 0)), len(first) + 1)
        return [(*first[:axis], len(shapes), *first[axis:])]

    def _run(self, *values: np.ndarray) -> np.ndarray:
        axis = normalize_axis(int(self.options.get("axis", 0)), values[0].ndim + 1)
        return np.stack(values, axis=axis).astype(self.outputs[0].dtype, copy=False)

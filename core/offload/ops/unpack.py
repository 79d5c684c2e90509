"""UNPACK: split a tensor along ``axis`` into ``num`` tensors without that dimension."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._shape import normalize_axis
from offload.ops._types import accepts


def unpack_axis(shape: Shape, options: Any, count: int) -> int:
    """The (non-negative) axis to unpack, whose dimension must be the ``count`` outputs."""
    axis = normalize_axis(int(options.get("axis", 0)), len(shape))
    check_shape(
        shape[axis] == count,
        f"expected dimension {axis} of size {count} (num), found shape {list(shape)}",
    )
    return axis


@register
class Unpack(OpKernel):
    op = "UNPACK"
    max_version = 6
    types = accepts("FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 BOOL")

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        count = len(ctx.node.outputs)
        num = int(ctx.options.get("num", 0))
        check_shape(num == count, f"expected num={num} outputs, found {count}")
        x = ctx.shape(0)
        axis = unpack_axis(x, ctx.options, count)
        return [(*x[:axis], *x[axis + 1 :])] * count

    def _run(self, x: np.ndarray) -> list[np.ndarray]:
        axis = unpack_axis(x.shape, self.options, len(self.outputs))
        lead = (slice(None),) * axis
        return [np.asarray(x[lead + (i,)]) for i in range(x.shape[axis])]

"""SPLIT: cut a tensor into ``num_splits`` equal parts along a (runtime) axis."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._shape import normalize_axis, scalar_int
from offload.ops._types import accepts


def split_axis(shape: Shape, axis: np.ndarray, parts: int) -> int:
    """The (non-negative) axis to cut, which must divide evenly into ``parts``."""
    a = normalize_axis(scalar_int(axis), len(shape))
    check_shape(
        shape[a] % parts == 0,
        f"expected dimension {a} of {list(shape)} to divide evenly into {parts}, found {shape[a]}",
    )
    return a


@register
class Split(OpKernel):
    op = "SPLIT"
    max_version = 5
    types = accepts("FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64", data=(1,))

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        parts = len(ctx.node.outputs)
        num_splits = int(ctx.options.get("num_splits", 0))
        check_shape(
            num_splits == parts and parts > 0,
            f"expected num_splits={num_splits} outputs (at least one), found {parts}",
        )
        x, axis = ctx.shape(1), ctx.constant(0)
        if axis is None:
            return [None] * parts
        a = split_axis(x, axis, parts)
        return [(*x[:a], x[a] // parts, *x[a + 1 :])] * parts

    def _run(self, axis: np.ndarray, x: np.ndarray) -> list[np.ndarray]:
        parts = len(self.outputs)
        return np.split(x, parts, axis=split_axis(x.shape, axis, parts))

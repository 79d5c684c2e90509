"""SPLIT_V: cut a tensor along an axis into parts of the given sizes (one may be -1)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._shape import int_list, normalize_axis, scalar_int
from offload.ops._types import accepts


def split_sizes(shape: Shape, size_splits: np.ndarray, axis: np.ndarray) -> tuple[int, list[int]]:
    """(axis, size of each part) with the -1 entry resolved; the sizes must add up to the
    axis's dimension."""
    a = normalize_axis(scalar_int(axis), len(shape))
    check_shape(
        np.ndim(size_splits) == 1,
        f"expected a vector of size_splits, found shape {list(np.shape(size_splits))}",
    )
    sizes = int_list(size_splits)
    check_shape(sizes.count(-1) <= 1, f"expected at most one -1 in size_splits, found {sizes}")
    if -1 in sizes:
        sizes[sizes.index(-1)] = shape[a] - sum(s for s in sizes if s != -1)
    check_shape(
        sum(sizes) == shape[a] and min(sizes, default=0) >= 0,
        f"expected non-negative size_splits adding up to dimension {a} of {list(shape)}, "
        f"found {sizes}",
    )
    return a, sizes


@register
class SplitV(OpKernel):
    op = "SPLIT_V"
    max_version = 3
    types = accepts("FLOAT32 INT8 UINT8 INT16 INT32 INT64")

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        parts = len(ctx.node.outputs)
        num_splits = int(ctx.options.get("num_splits", 0))
        check_shape(num_splits == parts, f"expected num_splits={num_splits} outputs, found {parts}")
        x, size_splits, axis = ctx.shape(0), ctx.constant(1), ctx.constant(2)
        if size_splits is None or axis is None:
            return [None] * parts
        a, sizes = split_sizes(x, size_splits, axis)
        return [(*x[:a], s, *x[a + 1 :]) for s in sizes]

    def _run(self, x: np.ndarray, size_splits: np.ndarray, axis: np.ndarray) -> list[np.ndarray]:
        a, sizes = split_sizes(x.shape, size_splits, axis)
        return np.split(x, np.cumsum(sizes)[:-1], axis=a)

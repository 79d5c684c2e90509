"""GATHER: pick slices along ``axis`` by index, with leading ``batch_dims`` shared between the
input and the indices. Negative or out-of-range indices are errors, as in TFLite."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._shape import check_index_range, normalize_axis
from offload.ops._types import accepts, one_of


def gather_shape(x: Shape, positions: Shape, options: Mapping[str, Any]) -> tuple[int, int, Shape]:
    """(axis, batch_dims, output shape) as LiteRT's Prepare resolves them: a negative axis
    counts from the input's rank, negative batch_dims from the positions' rank."""
    axis = normalize_axis(int(options.get("axis", 0)), len(x))
    batch_dims = int(options.get("batch_dims", 0))
    if batch_dims < 0:
        batch_dims += len(positions)
    check_shape(
        0 <= batch_dims <= min(axis, len(positions)) and x[:batch_dims] == positions[:batch_dims],
        f"expected batch_dims in [0, {min(axis, len(positions))}] shared by input {list(x)} "
        f"and positions {list(positions)}, found {batch_dims}",
    )
    return axis, batch_dims, x[:axis] + positions[batch_dims:] + x[axis + 1 :]


@register
class Gather(OpKernel):
    op = "GATHER"
    max_version = 8
    types = accepts(
        "FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL INT4 STRING",
        others={1: one_of("INT16 INT32 INT64")},
    )

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return [gather_shape(ctx.shape(0), ctx.shape(1), ctx.options)[2]]

    def _run(self, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
        axis, batch_dims, out_shape = gather_shape(x.shape, positions.shape, self.options)
        check_index_range(positions, x.shape[axis], "gather positions")
        if batch_dims == 0:
            return np.asarray(np.take(x, positions.astype(np.intp), axis=axis))
        # Flatten to (batch, outer, axis, inner) and positions to (batch, n): one fancy index.
        batch = math.prod(x.shape[:batch_dims])
        outer = math.prod(x.shape[batch_dims:axis])
        flat = x.reshape(batch, outer, x.shape[axis], -1)
        pos = positions.reshape(batch, 1, -1).astype(np.intp)
        picked = flat[np.arange(batch)[:, None, None], np.arange(outer)[None, :, None], pos]
        return picked.reshape(out_shape)

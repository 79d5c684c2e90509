"""GATHER_ND: index the leading ``indices.shape[-1]`` dimensions of ``params`` with each row
of ``indices``; out-of-range indices are errors, as in TFLite."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._shape import check_index_range
from offload.ops._types import accepts


def gather_nd_shape(params: Shape, indices: Shape) -> Shape:
    """indices.shape[:-1] + params.shape[indices.shape[-1]:], after LiteRT's checks."""
    check_shape(
        len(params) >= 1 and len(indices) >= 1,
        f"expected params and indices of rank >= 1, found {list(params)} and {list(indices)}",
    )
    nd = indices[-1]
    # LiteRT's Prepare lets a depth of 0 through and its Eval then fails on every index.
    check_shape(
        1 <= nd <= len(params),
        f"expected an index depth in [1, {len(params)}] (the params' rank), found {nd}",
    )
    return indices[:-1] + params[nd:]


@register
class GatherNd(OpKernel):
    op = "GATHER_ND"
    max_version = 6
    types = accepts("FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL")

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return [gather_nd_shape(ctx.shape(0), ctx.shape(1))]

    def _run(self, params: np.ndarray, indices: np.ndarray) -> np.ndarray:
        out_shape = gather_nd_shape(params.shape, indices.shape)
        for d in range(indices.shape[-1]):
            check_index_range(indices[..., d], params.shape[d], f"gather_nd index {d}")
        coords = tuple(np.moveaxis(indices.astype(np.intp), -1, 0))
        return params[coords].reshape(out_shape)

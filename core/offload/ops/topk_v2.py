"""TOPK_V2: the ``k`` largest values of each last-axis row and their indices, largest first;
ties keep the lower index first and NaN ranks below every number, as in TFLite."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._shape import check_one_value, not_scalar, scalar_int
from offload.ops._types import accepts, one_of


def top_count(shape: Shape, k: np.ndarray) -> int:
    """How many values each row yields: k, where a negative k yields none (as in LiteRT)."""
    not_scalar(shape)
    check_one_value(k.shape, "k")
    count = max(scalar_int(k), 0)
    check_shape(
        count <= shape[-1], f"expected k <= {shape[-1]} (the last dimension), found {count}"
    )
    return count


@register
class TopKV2(OpKernel):
    op = "TOPK_V2"
    max_version = 3
    types = accepts("FLOAT32 INT8 UINT8 INT16 INT32 INT64", output={1: one_of("INT16 INT32 INT64")})

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        x, k = ctx.shape(0), ctx.constant(1)
        if k is None:
            not_scalar(x)
            return [None, None]
        shape = (*x[:-1], top_count(x, k))
        return [shape, shape]

    def _run(self, x: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        count = top_count(x.shape, np.asarray(k))
        # A stable ascending sort of the negated values: ties stay in index order, and NaN
        # (negated, still NaN) sorts last. Widen first so -(-128) cannot overflow.
        wide = x.astype(np.float64 if np.issubdtype(x.dtype, np.floating) else np.int64)
        order = np.argsort(-wide, axis=-1, kind="stable")[..., :count]
        values = np.take_along_axis(x, order, axis=-1)
        return values, order.astype(self.outputs[1].dtype)

"""BROADCAST_TO: numpy broadcasting of the input to a (runtime) target shape."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._shape import int_list
from offload.ops._types import accepts


def broadcast_to_shape(shape: Shape, target: list[int]) -> Shape:
    """``target``, once LiteRT's checks pass: non-negative dims, at least the input's rank, and
    every input dim (aligned from the right) 1 or equal to the target's."""
    check_shape(min(target, default=0) >= 0, f"expected non-negative dims, found {target}")
    tail = target[len(target) - len(shape) :] if len(shape) <= len(target) else None
    check_shape(
        tail is not None and all(d == 1 or d == t for d, t in zip(shape, tail)),
        f"expected a target shape the input {list(shape)} broadcasts to, found {target}",
    )
    return tuple(target)


@register
class BroadcastTo(OpKernel):
    op = "BROADCAST_TO"
    max_version = 4
    types = accepts(
        "FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL INT4 FLOAT64 COMPLEX64 UINT16 UINT32"
    )

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        dims = ctx.shape(1)
        check_shape(len(dims) == 1, f"expected a 1-D shape input, found shape {list(dims)}")
        target = ctx.constant(1)
        if target is None:
            return [None]
        return [broadcast_to_shape(ctx.shape(0), int_list(target))]

    def _run(self, x: np.ndarray, shape: np.ndarray) -> np.ndarray:
        # A broadcast view has zero strides; copy so consumers see an ordinary array.
        return np.array(np.broadcast_to(x, broadcast_to_shape(x.shape, int_list(shape))))

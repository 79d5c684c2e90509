"""RESHAPE: the same elements in a new shape, taken from the shape tensor or the options."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._registry import register
from offload.ops._shape import int_list, resolve_shape
from offload.ops._types import ANY_STORED, accepts


def option_shape(options: Any) -> list[int] | None:
    """``new_shape`` from the options, or None when the options give none."""
    new_shape = [int(d) for d in options.get("new_shape", ()) or ()]
    if not new_shape:
        return None
    # TFLite's converter writes new_shape [0] for a reshape to a scalar.
    return [] if new_shape == [0] else new_shape


def reads_tensor(rank: int, is_int32: bool, has_options: bool) -> bool:
    """Whether the shape tensor, not the options, gives the new shape. Like TFLite, a rank-1
    int32 tensor wins over the options; with no options any shape tensor is all there is
    (TFLite would fail on an int64 one)."""
    return (rank == 1 and is_int32) or not has_options


@register
class Reshape(OpKernel):
    op = "RESHAPE"
    max_version = 1
    types = accepts(ANY_STORED)

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        x = ctx.shape(0)
        options = option_shape(ctx.options)
        if ctx.has(1):
            shape = ctx.constant(1)
            if shape is None and options is None and math.prod(ctx.shape(1)) == 0:
                # An empty shape tensor (a reshape to a scalar) has no buffer to be constant
                # in, but its value is known all the same.
                shape = np.zeros(ctx.shape(1), np.int32)
            if shape is None:
                # A runtime shape tensor decides unless the options win over it, which needs
                # it not to be a vector (its dtype is not known here, so int64 vectors too).
                if options is None or len(ctx.shape(1)) == 1:
                    return [None]
            elif reads_tensor(shape.ndim, shape.dtype == np.int32, options is not None):
                return [resolve_shape(int_list(shape), x)]
        return [resolve_shape(options or [], x)]

    def setup(self) -> None:
        self.option_shape = option_shape(self.options)

    def _run(self, x: np.ndarray, shape: np.ndarray | None = None) -> np.ndarray:
        has_options = self.option_shape is not None
        if shape is not None and reads_tensor(shape.ndim, shape.dtype == np.int32, has_options):
            target = int_list(shape)
        else:
            target = self.option_shape or []
        return x.reshape(resolve_shape(target, x.shape))

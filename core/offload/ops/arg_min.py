"""ARG_MIN: index of the smallest value along one axis (first one on ties)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._registry import register
from offload.ops._types import accepts, one_of
from offload.ops.arg_max import arg_axis, arg_output_shapes


@register
class ArgMin(OpKernel):
    op = "ARG_MIN"
    max_version = 3
    types = accepts("FLOAT32 INT8 UINT8 INT32 BOOL", output=one_of("INT32 INT64"))

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return arg_output_shapes(ctx)

    def _run(self, x: np.ndarray, axis: np.ndarray) -> np.ndarray:
        # np.asarray: numpy gives a scalar, not an array, when x is 1-D.
        return np.asarray(np.argmin(x, axis=arg_axis(axis, x.ndim)), self.outputs[0].dtype)

"""CUMSUM: running sum along one axis, optionally exclusive and/or reversed."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._registry import register
from offload.ops._shape import check_one_value, normalize_axis, not_scalar, scalar_int
from offload.ops._types import accepts


@register
class Cumsum(OpKernel):
    op = "CUMSUM"
    types = accepts("FLOAT32 INT32 INT64")

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        shape = not_scalar(ctx.shape(0))
        check_one_value(ctx.shape(1), "axis")
        axis = ctx.constant(1)
        if axis is not None:
            # The shape does not depend on the axis, but a bad constant one fails here, early.
            normalize_axis(scalar_int(axis), len(shape))
        return [shape]

    def setup(self) -> None:
        self.exclusive = bool(self.options.get("exclusive", False))
        self.reverse = bool(self.options.get("reverse", False))

    def _run(self, x: np.ndarray, axis: np.ndarray) -> np.ndarray:
        a = normalize_axis(scalar_int(axis), x.ndim)
        data = np.flip(x, a) if self.reverse else x
        # np.cumsum accumulates sequentially in the input dtype, as TFLite's loop does.
        out = np.cumsum(data, axis=a, dtype=x.dtype)
        if self.exclusive:
            out = np.roll(out, 1, axis=a)
            np.moveaxis(out, a, 0)[0] = 0
        if self.reverse:
            out = np.flip(out, a)
        return np.ascontiguousarray(out).astype(self.outputs[0].dtype, copy=False)

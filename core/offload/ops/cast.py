"""CAST between numeric types and bool: C++ static_cast semantics (floats truncate toward
zero, integers wrap, nonzero -> true, complex -> its real part)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._registry import register


@register
class Cast(OpKernel):
    op = "CAST"
    max_version = 7

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return [ctx.shape(0)]

    def run(self, x: np.ndarray) -> np.ndarray:  # type: ignore[override]
        dtype = self.outputs[0].dtype
        x = np.asarray(x)
        if x.dtype.kind == "c" and dtype.kind != "c":
            x = x.real
        if dtype == np.bool_:
            return x != 0
        with np.errstate(invalid="ignore", over="ignore"):
            return x.astype(dtype)

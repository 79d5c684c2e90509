"""COMPLEX_ABS: |z| (hypot of real and imaginary parts), complex64 -> float32."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._registry import register
from offload.ops._types import accepts, one_of


@register
class ComplexAbs(OpKernel):
    op = "COMPLEX_ABS"
    types = accepts("COMPLEX64 COMPLEX128", output=one_of("FLOAT32 FLOAT64"))

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return [ctx.shape(0)]

    def _run(self, x: np.ndarray) -> np.ndarray:
        return np.abs(x).astype(self.outputs[0].dtype, copy=False)

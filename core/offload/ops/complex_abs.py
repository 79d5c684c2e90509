"""COMPLEX_ABS: |z| (hypot of real and imaginary parts), complex64 -> float32."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register


@register
class ComplexAbs(OpKernel):
    op = "COMPLEX_ABS"

    def run(self, x: np.ndarray) -> np.ndarray:  # type: ignore[override]
        return np.abs(x).astype(self.outputs[0].dtype, copy=False)

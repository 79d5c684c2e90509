"""MAXIMUM: ``a > b ? a : b`` elementwise (so a NaN in a yields b); quantized inputs share one
scale, so the raw values are compared."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import BinaryOp
from offload.ops._registry import register


def _maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(np.greater(a, b), a, b)


@register
class Maximum(BinaryOp):
    op = "MAXIMUM"
    max_version = 4
    fn = staticmethod(_maximum)
    raw_quantized = True

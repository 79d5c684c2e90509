"""MINIMUM: ``a < b ? a : b`` elementwise (so a NaN in a yields b); quantized inputs share one
scale, so the raw values are compared."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import BinaryOp
from offload.ops._registry import register
from offload.ops._types import accepts


def _minimum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(np.less(a, b), a, b)


@register
class Minimum(BinaryOp):
    op = "MINIMUM"
    max_version = 4
    types = accepts("FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64", data=(0, 1))
    fn = staticmethod(_minimum)
    raw_quantized = True

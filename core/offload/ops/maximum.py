"""MAXIMUM: ``a > b ? a : b`` elementwise (so a NaN in a yields b); quantized inputs share one
scale, so the raw values are compared."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import ExtremumOp
from offload.ops._registry import register


@register
class Maximum(ExtremumOp):
    op = "MAXIMUM"
    prefer = staticmethod(np.greater)

"""GREATER_EQUAL: elementwise a >= b -> bool, with broadcasting; quantized inputs compared on
a common scale."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import ComparisonOp
from offload.ops._registry import register
from offload.ops._types import accepts, one_of


@register
class GreaterEqual(ComparisonOp):
    op = "GREATER_EQUAL"
    max_version = 3
    types = accepts(
        "FLOAT32 FLOAT16 INT16 INT32 INT64", "INT8 UINT8", data=(0, 1), output=one_of("BOOL")
    )
    fn = staticmethod(np.greater_equal)

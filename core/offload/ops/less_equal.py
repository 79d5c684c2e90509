"""LESS_EQUAL: elementwise a <= b -> bool, with broadcasting; quantized inputs compared on a common
scale."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import ComparisonOp
from offload.ops._registry import register


@register
class LessEqual(ComparisonOp):
    op = "LESS_EQUAL"
    max_version = 2
    fn = staticmethod(np.less_equal)

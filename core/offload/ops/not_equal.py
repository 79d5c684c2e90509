"""NOT_EQUAL: elementwise a != b -> bool, with broadcasting; quantized inputs compared on a common
scale."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import ComparisonOp
from offload.ops._registry import register


@register
class NotEqual(ComparisonOp):
    op = "NOT_EQUAL"
    max_version = 4
    fn = staticmethod(np.not_equal)

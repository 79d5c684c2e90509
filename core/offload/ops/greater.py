"""GREATER: elementwise a > b -> bool, with broadcasting; quantized inputs compared on a common
scale."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import ComparisonOp
from offload.ops._registry import register


@register
class Greater(ComparisonOp):
    op = "GREATER"
    max_version = 2
    fn = staticmethod(np.greater)

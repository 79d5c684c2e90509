"""LESS: elementwise a < b -> bool, with broadcasting; quantized inputs compared on a common
scale."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import ComparisonOp
from offload.ops._registry import register


@register
class Less(ComparisonOp):
    op = "LESS"
    max_version = 3
    fn = staticmethod(np.less)

"""SUB: a - b with broadcasting and a fused activation; quantized like ADD with b negated."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import BinaryOp, QuantizedFn, add_sub_quantized
from offload.ops._registry import register


@register
class Sub(BinaryOp):
    op = "SUB"
    max_version = 5
    fn = staticmethod(np.subtract)
    fused = True
    clamp_float = True

    def quantized(self) -> QuantizedFn:
        return add_sub_quantized(self, -1)

"""ADD: a + b with broadcasting and a fused activation; quantized via TFLite's shifted sum."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import BinaryOp, QuantizedFn, add_sub_quantized
from offload.ops._registry import register


@register
class Add(BinaryOp):
    op = "ADD"
    max_version = 6
    fn = staticmethod(np.add)
    fused = True
    clamp_float = True

    def quantized(self) -> QuantizedFn:
        return add_sub_quantized(self, +1)

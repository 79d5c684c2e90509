"""SUB: a - b with broadcasting and a fused activation; quantized like ADD with b negated."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import BinaryOp, QuantizedFn, add_sub_quantized
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class Sub(BinaryOp):
    op = "SUB"
    max_version = 5
    types = accepts("FLOAT32 FLOAT16 INT32 INT64", "INT8 UINT8 INT16", data=(0, 1))
    fn = staticmethod(np.subtract)
    fused = True
    clamp_float = True

    def quantized(self) -> QuantizedFn:
        return add_sub_quantized(self, -1)

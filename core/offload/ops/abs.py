"""ABS: |x| for float and integer tensors.

Quantized int8/int16: |x - zero_point|, rescaled only when input and output scales differ,
plus the output zero point, clamped.
"""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import QuantizedFn, UnaryOp, scale_zp
from offload.ops._lut import Lut, lut_from_int
from offload.ops._quant import multiply_by_quantized_multiplier, quantize_multiplier
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class Abs(UnaryOp):
    op = "ABS"
    max_version = 5
    types = accepts("FLOAT32 FLOAT16 INT16 INT32", "INT8 INT16")
    fn = staticmethod(np.abs)

    def quantized(self) -> QuantizedFn:
        (si, zi), (so, zo) = scale_zp(self.inputs[0]), scale_zp(self.outputs[0])
        m, sh = quantize_multiplier(si / so)
        rescale = np.float32(si) != np.float32(so)

        def rule(v: np.ndarray) -> np.ndarray:
            value = np.abs(v - zi)
            return (multiply_by_quantized_multiplier(value, m, sh) if rescale else value) + zo

        return Lut(lut_from_int(rule, self.dtype))

"""SQRT: square root in float32.

int8/int16: dequantize, sqrt in float32, divide by the output scale and truncate toward zero
(TFLite casts rather than rounds here), add the output zero point, clamp.
"""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import QuantizedFn, UnaryOp, scale_zp
from offload.ops._lut import Lut, lut_from_int
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class Sqrt(UnaryOp):
    op = "SQRT"
    max_version = 2
    types = accepts("FLOAT32 FLOAT16", "INT8 INT16")
    fn = staticmethod(np.sqrt)

    def quantized(self) -> QuantizedFn:
        (si, zi), (so, zo) = scale_zp(self.inputs[0]), scale_zp(self.outputs[0])

        def rule(v: np.ndarray) -> np.ndarray:
            real = np.float32(si) * (v - zi).astype(np.float32)
            with np.errstate(invalid="ignore"):
                root = np.sqrt(real) / np.float32(so)
            return np.trunc(np.nan_to_num(root)).astype(np.int64) + zo

        return Lut(lut_from_int(rule, self.dtype))

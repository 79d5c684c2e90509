"""TANH: tanh(x) in float32.

int8/uint8: TFLite's 256-entry table of the float tanh. int16 is not implemented.
"""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import QuantizedFn, UnaryOp
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class Tanh(UnaryOp):
    op = "TANH"
    max_version = 3
    types = accepts("FLOAT32 FLOAT16", "INT8 UINT8 INT16")
    fn = staticmethod(np.tanh)
    lut_fn = staticmethod(np.tanh)

    def quantized(self) -> QuantizedFn | None:
        # int16 interpolates in a hard-coded sigmoid table (and, for power-of-two scales, uses
        # gemmlowp's fixed-point exp): not implemented, so refuse rather than approximate.
        return None if self.dtype == np.int16 else super().quantized()

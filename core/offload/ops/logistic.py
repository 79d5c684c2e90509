"""LOGISTIC (sigmoid): 1 / (1 + e^-x) in float32.

int8/uint8: TFLite's 256-entry table of the float sigmoid. int16 is not implemented.
"""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import QuantizedFn, UnaryOp
from offload.ops._registry import register


def _sigmoid(x: np.ndarray) -> np.ndarray:
    one = np.float32(1.0)
    return one / (one + np.exp(-x))


@register
class Logistic(UnaryOp):
    op = "LOGISTIC"
    max_version = 3
    fn = staticmethod(_sigmoid)
    lut_fn = staticmethod(_sigmoid)

    def quantized(self) -> QuantizedFn | None:
        # int16 interpolates in a hard-coded sigmoid table (and, for power-of-two scales, uses
        # gemmlowp's fixed-point exp): not implemented, so refuse rather than approximate.
        return None if self.dtype == np.int16 else super().quantized()

"""LOGISTIC (sigmoid): 1 / (1 + e^-x) in float32.

float32 is LiteRT's optimized kernel bit for bit: Eigen's float logistic functor
(:func:`offload.ops._eigen.logistic`).

int8/uint8: TFLite's 256-entry table of the float sigmoid. int16 is not implemented.
"""

from __future__ import annotations

import numpy as np

from offload.ops import _eigen
from offload.ops._elementwise import QuantizedFn, UnaryOp
from offload.ops._registry import register
from offload.ops._types import accepts


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """The float sigmoid LiteRT tabulates for int8/uint8 (1 / (1 + std::exp(-x)))."""
    one = np.float32(1.0)
    return one / (one + np.exp(-x))


def _logistic(x: np.ndarray) -> np.ndarray:
    if x.dtype != np.float32:
        return _sigmoid(x)
    return _eigen.logistic(x)


@register
class Logistic(UnaryOp):
    op = "LOGISTIC"
    max_version = 3
    types = accepts("FLOAT32 FLOAT16", "INT8 UINT8 INT16")
    fn = staticmethod(_logistic)
    lut_fn = staticmethod(_sigmoid)

    def quantized(self) -> QuantizedFn | None:
        # int16 interpolates in a hard-coded sigmoid table (and, for power-of-two scales, uses
        # gemmlowp's fixed-point exp): not implemented, so refuse rather than approximate.
        return None if self.dtype == np.int16 else super().quantized()

"""LOGISTIC (sigmoid): 1 / (1 + e^-x).

float32 is LiteRT's optimized kernel bit for bit: Eigen's float logistic functor
(:func:`offload.ops._eigen.logistic`). float16 is the same kernel's ``Logistic<Eigen::half>``:
Eigen's generic functor, e^x / (1 + e^x) in half arithmetic.

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


def _logistic_half(x: np.ndarray) -> np.ndarray:
    """Eigen's generic logistic functor on Eigen::half: e = exp(x) rounded to half, then
    e / (1 + e) with each step rounded to half, and 1 where e overflows to inf.

    Not 1 / (1 + e^-x): below about -11.1 e^-x overflows half, which made that form 0 where
    LiteRT gives e^x (fuzz case 6440), and the two round apart elsewhere. exp goes through
    float32; every half input then rounds to the half LiteRT's exp gives.
    """
    half = np.float16
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(np.asarray(x, np.float32)).astype(half)
        return np.where(np.isinf(e), half(1), e / (half(1) + e))


def _logistic(x: np.ndarray) -> np.ndarray:
    return _logistic_half(x) if x.dtype == np.float16 else _eigen.logistic(x)


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

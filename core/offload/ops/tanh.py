"""TANH: tanh(x). float32 is LiteRT's optimized kernel bit for bit: Eigen's fast-math tanh
(:func:`offload.ops._eigen.tanh`), a rational function that numpy's tanh differs from by up
to 5 ULP; float16 is numpy's.

int8/uint8: TFLite's 256-entry table of the float tanh. int16 is not implemented.
"""

from __future__ import annotations

import numpy as np

from offload.ops import _eigen
from offload.ops._elementwise import QuantizedFn, UnaryOp
from offload.ops._registry import register
from offload.ops._types import accepts


def _float_tanh(x: np.ndarray) -> np.ndarray:
    return _eigen.tanh(x) if x.dtype == np.float32 else np.tanh(x)


@register
class Tanh(UnaryOp):
    op = "TANH"
    max_version = 3
    types = accepts("FLOAT32 FLOAT16", "INT8 UINT8 INT16")
    fn = staticmethod(_float_tanh)
    lut_fn = staticmethod(np.tanh)

    def quantized(self) -> QuantizedFn | None:
        # int16 interpolates in a hard-coded sigmoid table (and, for power-of-two scales, uses
        # gemmlowp's fixed-point exp): not implemented, so refuse rather than approximate.
        return None if self.dtype == np.int16 else super().quantized()

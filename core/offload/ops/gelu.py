"""GELU: 0.5 x (1 + erf(x / sqrt 2)), or the tanh approximation when ``approximate``.

The exact form is written with erfc, as TFLite does, to avoid cancellation for large negative
x. Quantized inputs (int8, uint8, int16) go through TFLite's lookup tables of the float form.
"""

from __future__ import annotations

import math

import numpy as np

from offload.ops._elementwise import QuantizedFn, UnaryOp
from offload.ops._registry import register
from offload.ops._types import accepts

_ERFC = np.frompyfunc(math.erfc, 1, 1)
_SQRT_2_OVER_PI = np.float32(math.sqrt(2.0 / math.pi))


def _gelu(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float32)
    erfc = np.asarray(_ERFC(x.astype(np.float64) * -math.sqrt(0.5)), np.float64).astype(np.float32)
    return np.float32(0.5) * x * erfc


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float32)
    inner = _SQRT_2_OVER_PI * (x + np.float32(0.044715) * x * x * x)
    return np.float32(0.5) * x * (np.float32(1.0) + np.tanh(inner))


@register
class Gelu(UnaryOp):
    op = "GELU"
    max_version = 3
    types = accepts("FLOAT32 FLOAT16", "INT8 UINT8 INT16")
    fn = staticmethod(_gelu)

    def setup(self) -> None:
        self.approximate = bool(self.options.get("approximate", False))
        super().setup()

    def quantized(self) -> QuantizedFn:
        return self.float_lut(_gelu_tanh if self.approximate else _gelu)

    def run(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        # ``out`` is UnaryOp's; never given here, as writes_into holds only for UnaryOp.run.
        if self._quantized is not None:
            return self._quantized(x)
        return (_gelu_tanh if self.approximate else _gelu)(x).astype(self.dtype, copy=False)

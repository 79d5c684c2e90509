"""GELU: 0.5 x (1 + erf(x / sqrt 2)), or the tanh approximation when ``approximate``.

The exact form is written with erfc, as TFLite does, to avoid cancellation for large negative
x. float16 rounds to half after every step, as LiteRT's Eigen::half arithmetic does.
Quantized inputs (int8, uint8, int16) go through TFLite's lookup tables of the float form.
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


def _gelu_half(x: np.ndarray, approximate: bool) -> np.ndarray:
    """float16 as LiteRT's Eigen::half expression computes it: every constant rounded to half
    and every step rounded back to half (numpy's float16 arithmetic does the same, in float32
    between roundings); erfc and tanh in float32, then rounded to half."""
    x = np.asarray(x, np.float16)
    half = np.float16
    with np.errstate(over="ignore", invalid="ignore"):
        if approximate:
            inner = half(_SQRT_2_OVER_PI) * (x + half(0.044715) * (x * x * x))
            tanh = np.tanh(inner.astype(np.float32)).astype(np.float16)
            return np.asarray((half(0.5) * x) * (half(1.0) + tanh))
        scaled = (x * half(-math.sqrt(0.5))).astype(np.float64)
        erfc = np.asarray(_ERFC(scaled), np.float64).astype(np.float32).astype(np.float16)
        return np.asarray((half(0.5) * x) * erfc)


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
        # np.asarray: numpy answers a 0-d input with a scalar, and the executor needs an array.
        if self._quantized is not None:
            return np.asarray(self._quantized(x))
        if self.dtype == np.float16:
            return _gelu_half(x, self.approximate)
        fn = _gelu_tanh if self.approximate else _gelu
        return np.asarray(fn(x)).astype(self.dtype, copy=False)

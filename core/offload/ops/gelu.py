"""GELU: 0.5 x (1 + erf(x / sqrt 2)), or the tanh approximation when ``approximate``.

The exact form is written with erfc, as TFLite does, to avoid cancellation for large negative
x. float32 is LiteRT's kernel bit for bit: an Eigen expression, with Eigen's erfc and tanh.
float16 rounds to half after every step, as LiteRT's Eigen::half arithmetic does.
Quantized inputs (int8, uint8, int16) go through TFLite's lookup tables of the float form.
"""

from __future__ import annotations

import math

import numpy as np

from offload.ops import _eigen
from offload.ops._elementwise import QuantizedFn, UnaryOp
from offload.ops._libm import erfcf, tanhf
from offload.ops._registry import register
from offload.ops._types import accepts

_ERFC = np.frompyfunc(math.erfc, 1, 1)
_SQRT_2_OVER_PI = np.float32(math.sqrt(2.0 / math.pi))


_MINUS_SQRT_HALF = np.float32(-math.sqrt(0.5))
_HALF, _ONE, _CUBIC = np.float32(0.5), np.float32(1.0), np.float32(0.044715)


def _gelu(x: np.ndarray) -> np.ndarray:
    """float32 GELU as LiteRT's kernel evaluates it: an Eigen array expression, so Eigen's
    erfc (:func:`offload.ops._eigen.erfc`)."""
    x = np.asarray(x, np.float32)
    return (_HALF * x) * _eigen.erfc(x * _MINUS_SQRT_HALF)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    """The tanh approximation as LiteRT's kernel evaluates it: Eigen's cube and tanh."""
    x = np.asarray(x, np.float32)
    inner = _SQRT_2_OVER_PI * (x + _CUBIC * ((x * x) * x))
    return (_HALF * x) * (_ONE + _eigen.tanh(inner))


def _gelu_table(x: np.ndarray) -> np.ndarray:
    """GeluTransform, the scalar function LiteRT tabulates for quantized inputs: the C
    library's erfcf."""
    x = np.asarray(x, np.float32)
    return (_HALF * x) * erfcf(x * _MINUS_SQRT_HALF)


def _gelu_tanh_table(x: np.ndarray) -> np.ndarray:
    """GeluTransformApproximate: the C library's tanhf, the cube multiplied left to right."""
    x = np.asarray(x, np.float32)
    return (_HALF * x) * (_ONE + tanhf(_SQRT_2_OVER_PI * (x + ((_CUBIC * x) * x) * x)))


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
        return self.float_lut(_gelu_tanh_table if self.approximate else _gelu_table)

    def _run(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        # ``out`` is UnaryOp's; never given here, as writes_into holds only for UnaryOp.run.
        # np.asarray: numpy answers a 0-d input with a scalar, and the executor needs an array.
        if self._quantized is not None:
            return np.asarray(self._quantized(x))
        if self.dtype == np.float16:
            return _gelu_half(x, self.approximate)
        fn = _gelu_tanh if self.approximate else _gelu
        with np.errstate(all="ignore"):  # infinities: 0 * inf is NaN, as in LiteRT
            return np.asarray(fn(x)).astype(self.dtype, copy=False)

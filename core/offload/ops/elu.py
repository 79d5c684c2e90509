"""ELU: x for x >= 0, e^x - 1 below; float32 with the C library's expm1f, which LiteRT's
kernel calls through std::expm1 (:mod:`offload.ops._libm`); int8 through TFLite's table of
the same."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import QuantizedFn, UnaryOp
from offload.ops._libm import expm1f
from offload.ops._registry import register
from offload.ops._types import accepts


def _elu(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    negative = x < 0
    result = x.copy()
    result[negative] = expm1f(x[negative])
    return result


@register
class Elu(UnaryOp):
    op = "ELU"
    max_version = 1
    types = accepts("FLOAT32 FLOAT16", "INT8")
    fn = staticmethod(_elu)

    def quantized(self) -> QuantizedFn | None:
        return self.float_lut(_elu) if self.dtype == np.int8 else None

"""ELU: x for x >= 0, e^x - 1 below, in float32; int8 through TFLite's table of the same."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import QuantizedFn, UnaryOp
from offload.ops._registry import register
from offload.ops._types import accepts


def _elu(x: np.ndarray) -> np.ndarray:
    return np.where(x < 0, np.expm1(x), x)


@register
class Elu(UnaryOp):
    op = "ELU"
    max_version = 1
    types = accepts("FLOAT32 FLOAT16", "INT8")
    fn = staticmethod(_elu)

    def quantized(self) -> QuantizedFn | None:
        return self.float_lut(_elu) if self.dtype == np.int8 else None

"""DIV: a / b with broadcasting and a fused activation (float32, and int32 truncating)."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import BinaryOp, nonzero_divisor
from offload.ops._registry import register
from offload.ops._types import accepts


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.asarray(a).dtype.kind in "iu":
        nonzero_divisor(b)
        # C++ integer division truncates toward zero; numpy's // floors.
        q = np.floor_divide(a, b)
        inexact = (np.remainder(a, b) != 0) & ((np.asarray(a) < 0) != (np.asarray(b) < 0))
        return q + inexact
    return np.true_divide(a, b)


@register
class Div(BinaryOp):
    op = "DIV"
    max_version = 2
    types = accepts("FLOAT32 FLOAT16 INT32", "INT8 UINT8 INT16", data=(0, 1))
    fn = staticmethod(_divide)
    fused = True
    clamp_float = True

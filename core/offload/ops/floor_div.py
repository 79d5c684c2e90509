"""FLOOR_DIV: floor(a / b); integers floor exactly, floats compute floor of the float32
quotient (not numpy's floor_divide, which rounds differently near integers)."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import BinaryOp, nonzero_divisor
from offload.ops._registry import register
from offload.ops._types import accepts


def _floor_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.asarray(a).dtype.kind in "iu":
        nonzero_divisor(b)
        return np.floor_divide(a, b)
    return np.floor(np.true_divide(a, b))


@register
class FloorDiv(BinaryOp):
    op = "FLOOR_DIV"
    max_version = 3
    types = accepts("FLOAT32 INT8 INT16 INT32", data=(0, 1))
    fn = staticmethod(_floor_div)

"""POW: a ** b elementwise for float32 and int32; float32 is the C library's powf, which
LiteRT's kernel calls through std::pow (:func:`offload.ops._libm.powf`)."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import BinaryOp
from offload.ops._libm import powf
from offload.ops._registry import register
from offload.ops._types import accepts


def _power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.asarray(a).dtype == np.float32:
        return powf(a, b)
    return np.power(a, b)


@register
class Pow(BinaryOp):
    op = "POW"
    max_version = 1
    types = accepts("FLOAT32 INT32", data=(0, 1))
    fn = staticmethod(_power)

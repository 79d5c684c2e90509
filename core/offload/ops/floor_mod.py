"""FLOOR_MOD: remainder with the sign of the divisor (truncated fmod, then shifted by b where
the signs differ), for integers and floats."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import BinaryOp, nonzero_divisor
from offload.ops._registry import register
from offload.ops._types import accepts


def _floor_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.asarray(b).dtype.kind in "iu":
        nonzero_divisor(b)
    trunc = np.fmod(a, b)
    return np.where((trunc != 0) & ((np.asarray(b) < 0) != (trunc < 0)), trunc + b, trunc)


@register
class FloorMod(BinaryOp):
    op = "FLOOR_MOD"
    max_version = 2
    types = accepts("FLOAT32 INT8 INT16 INT32 INT64", data=(0, 1))
    fn = staticmethod(_floor_mod)

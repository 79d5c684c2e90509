"""ROUND: round half to even in float32 (TFLite's RoundToNearest, like numpy)."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import UnaryOp
from offload.ops._registry import register
from offload.ops._types import accepts


def _round(x: np.ndarray) -> np.ndarray:
    # np.round itself, behind one signature: mypy types ``staticmethod(np.round)`` by the
    # first of its overloads (a scalar one), which is no elementwise rule.
    return np.round(x)


@register
class Round(UnaryOp):
    op = "ROUND"
    max_version = 1
    types = accepts("FLOAT32 FLOAT16")
    fn = staticmethod(_round)

"""ROUND: round half to even in float32 (TFLite's RoundToNearest, like numpy)."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import UnaryOp
from offload.ops._registry import register


@register
class Round(UnaryOp):
    op = "ROUND"
    max_version = 1
    fn = staticmethod(np.round)

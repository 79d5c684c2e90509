"""SQUARE: x * x."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import UnaryOp
from offload.ops._registry import register


@register
class Square(UnaryOp):
    op = "SQUARE"
    max_version = 1
    fn = staticmethod(np.square)

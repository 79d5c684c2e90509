"""SQUARE: x * x."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import UnaryOp
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class Square(UnaryOp):
    op = "SQUARE"
    max_version = 1
    types = accepts("FLOAT32 FLOAT16")
    fn = staticmethod(np.square)

"""FLOOR: round toward -inf in float32."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import UnaryOp
from offload.ops._registry import register


@register
class Floor(UnaryOp):
    op = "FLOOR"
    max_version = 1
    fn = staticmethod(np.floor)

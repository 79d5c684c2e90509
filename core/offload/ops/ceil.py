"""CEIL: round toward +inf in float32."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import UnaryOp
from offload.ops._registry import register


@register
class Ceil(UnaryOp):
    op = "CEIL"
    max_version = 1
    fn = staticmethod(np.ceil)

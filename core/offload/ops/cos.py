"""COS: cos(x) in float32."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import UnaryOp
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class Cos(UnaryOp):
    op = "COS"
    max_version = 2
    types = accepts("FLOAT32 FLOAT16")
    fn = staticmethod(np.cos)

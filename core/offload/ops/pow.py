"""POW: a ** b elementwise for float32 and int32."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import BinaryOp
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class Pow(BinaryOp):
    op = "POW"
    max_version = 1
    types = accepts("FLOAT32 INT32", data=(0, 1))
    fn = staticmethod(np.power)

"""EXP: e**x in float32; int8/int16 through TFLite's lookup table of exp."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import UnaryOp
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class Exp(UnaryOp):
    op = "EXP"
    max_version = 2
    types = accepts("FLOAT32 FLOAT16", "INT8 INT16")
    fn = staticmethod(np.exp)
    lut_fn = staticmethod(np.exp)

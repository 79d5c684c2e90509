"""EXP: e**x; float32 is the C library's expf, which LiteRT's kernel calls through std::exp
(:mod:`offload.ops._libm`); int8/int16 through TFLite's lookup table of exp."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import UnaryOp
from offload.ops._libm import expf
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class Exp(UnaryOp):
    op = "EXP"
    max_version = 2
    types = accepts("FLOAT32 FLOAT16", "INT8 INT16")
    fn = staticmethod(expf)
    lut_fn = staticmethod(np.exp)

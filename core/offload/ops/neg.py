"""NEG: -x, for float and integer tensors (integers wrap like C++)."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import UnaryOp
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class Neg(UnaryOp):
    op = "NEG"
    max_version = 1
    types = accepts("FLOAT32 FLOAT16 INT8 INT16 INT32 INT64")
    fn = staticmethod(np.negative)
    raw_quantized = True

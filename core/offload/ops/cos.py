"""COS: cos(x); float32 is the C library's cosf, which LiteRT's kernel calls through
std::cos (:mod:`offload.ops._libm`)."""

from __future__ import annotations

from offload.ops._elementwise import UnaryOp
from offload.ops._libm import cosf
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class Cos(UnaryOp):
    op = "COS"
    max_version = 2
    types = accepts("FLOAT32 FLOAT16")
    fn = staticmethod(cosf)

"""SIN: sin(x); float32 is the C library's sinf, which LiteRT's kernel calls through
std::sin (:mod:`offload.ops._libm`)."""

from __future__ import annotations

from offload.ops._elementwise import UnaryOp
from offload.ops._libm import sinf
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class Sin(UnaryOp):
    op = "SIN"
    max_version = 2
    types = accepts("FLOAT32 FLOAT16")
    fn = staticmethod(sinf)

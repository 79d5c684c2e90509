"""LOGICAL_AND: elementwise boolean and with broadcasting."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import LogicalOp
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class LogicalAnd(LogicalOp):
    op = "LOGICAL_AND"
    types = accepts("BOOL", data=(0, 1))
    fn = staticmethod(np.logical_and)

"""LOGICAL_NOT: elementwise boolean not."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import UnaryOp
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class LogicalNot(UnaryOp):
    op = "LOGICAL_NOT"
    max_version = 1
    types = accepts("BOOL")
    fn = staticmethod(np.logical_not)

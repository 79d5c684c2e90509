"""LOGICAL_NOT: elementwise boolean not."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import UnaryOp
from offload.ops._registry import register


@register
class LogicalNot(UnaryOp):
    op = "LOGICAL_NOT"
    max_version = 1
    fn = staticmethod(np.logical_not)

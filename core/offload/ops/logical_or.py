"""LOGICAL_OR: elementwise boolean or with broadcasting."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import LogicalOp
from offload.ops._registry import register


@register
class LogicalOr(LogicalOp):
    op = "LOGICAL_OR"
    fn = staticmethod(np.logical_or)

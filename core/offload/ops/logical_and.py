"""LOGICAL_AND: elementwise boolean and with broadcasting."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import LogicalOp
from offload.ops._registry import register


@register
class LogicalAnd(LogicalOp):
    op = "LOGICAL_AND"
    fn = staticmethod(np.logical_and)

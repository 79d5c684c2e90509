"""ARG_MIN: index of the smallest value along one axis (first one on ties)."""

from __future__ import annotations

import numpy as np

from offload.ops._arg_reduce import ArgReduceOp
from offload.ops._registry import register


@register
class ArgMin(ArgReduceOp):
    op = "ARG_MIN"
    pick = staticmethod(np.argmin)

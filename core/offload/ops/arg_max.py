"""ARG_MAX: index of the largest value along one axis (first one on ties)."""

from __future__ import annotations

import numpy as np

from offload.ops._arg_reduce import ArgReduceOp
from offload.ops._registry import register


@register
class ArgMax(ArgReduceOp):
    op = "ARG_MAX"
    pick = staticmethod(np.argmax)

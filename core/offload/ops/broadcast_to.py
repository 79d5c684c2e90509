"""BROADCAST_TO: numpy broadcasting of the input to a (runtime) target shape."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register
from offload.ops._shape import int_list


@register
class BroadcastTo(OpKernel):
    op = "BROADCAST_TO"
    max_version = 4

    def run(self, x: np.ndarray, shape: np.ndarray) -> np.ndarray:
        # A broadcast view has zero strides; copy so consumers see an ordinary array.
        return np.array(np.broadcast_to(x, int_list(shape)))

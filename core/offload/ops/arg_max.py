"""ARG_MAX: index of the largest value along one axis (first one on ties)."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register


def arg_axis(axis: np.ndarray, ndim: int) -> int:
    """The single axis of ARG_MAX/ARG_MIN, wrapped when negative."""
    a = int(np.asarray(axis).reshape(-1)[0])
    return a + ndim if a < 0 else a


@register
class ArgMax(OpKernel):
    op = "ARG_MAX"
    max_version = 3

    def run(self, x: np.ndarray, axis: np.ndarray) -> np.ndarray:
        return np.argmax(x, axis=arg_axis(axis, x.ndim)).astype(self.outputs[0].dtype)

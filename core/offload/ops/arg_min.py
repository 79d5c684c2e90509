"""ARG_MIN: index of the smallest value along one axis (first one on ties)."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register
from offload.ops.arg_max import arg_axis


@register
class ArgMin(OpKernel):
    op = "ARG_MIN"
    max_version = 3

    def run(self, x: np.ndarray, axis: np.ndarray) -> np.ndarray:
        return np.argmin(x, axis=arg_axis(axis, x.ndim)).astype(self.outputs[0].dtype)

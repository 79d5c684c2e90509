"""SHAPE: the input's dimensions as a 1-D int32 or int64 tensor (``out_type``)."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register


@register
class Shape(OpKernel):
    op = "SHAPE"
    max_version = 1

    def run(self, x: np.ndarray) -> np.ndarray:
        return np.array(x.shape, dtype=self.outputs[0].dtype)

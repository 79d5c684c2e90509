"""PACK: stack ``values_count`` tensors of one shape along a new ``axis``."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register
from offload.ops._shape import normalize_axis


@register
class Pack(OpKernel):
    op = "PACK"
    max_version = 5

    def run(self, *values: np.ndarray) -> np.ndarray:
        axis = normalize_axis(int(self.options.get("axis", 0)), values[0].ndim + 1)
        return np.stack(values, axis=axis).astype(self.outputs[0].dtype, copy=False)

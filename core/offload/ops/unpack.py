"""UNPACK: split a tensor along ``axis`` into ``num`` tensors without that dimension."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register
from offload.ops._shape import normalize_axis


@register
class Unpack(OpKernel):
    op = "UNPACK"
    max_version = 6

    def run(self, x: np.ndarray) -> list[np.ndarray]:
        axis = normalize_axis(int(self.options.get("axis", 0)), x.ndim)
        if x.shape[axis] != len(self.outputs):
            raise ValueError(
                f"expected dimension {axis} of size {len(self.outputs)} (num), found {x.shape}"
            )
        lead = (slice(None),) * axis
        return [np.asarray(x[lead + (i,)]) for i in range(x.shape[axis])]

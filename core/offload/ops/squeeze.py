"""SQUEEZE: drop size-1 dimensions (all of them, or those in ``squeeze_dims``)."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register
from offload.ops._shape import normalize_axis


@register
class Squeeze(OpKernel):
    op = "SQUEEZE"
    max_version = 2

    def setup(self) -> None:
        self.dims = tuple(self.options.get("squeeze_dims", ()) or ())

    def run(self, x: np.ndarray) -> np.ndarray:
        if not self.dims:
            return x.reshape([d for d in x.shape if d != 1])
        axes = {normalize_axis(int(a), x.ndim, "squeeze dim") for a in self.dims}
        for a in axes:
            if x.shape[a] != 1:
                raise ValueError(f"cannot squeeze dimension {a} of size {x.shape[a]}")
        return x.reshape([d for i, d in enumerate(x.shape) if i not in axes])

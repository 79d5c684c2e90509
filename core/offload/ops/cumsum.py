"""CUMSUM: running sum along one axis, optionally exclusive and/or reversed."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register


@register
class Cumsum(OpKernel):
    op = "CUMSUM"

    def setup(self) -> None:
        self.exclusive = bool(self.options.get("exclusive", False))
        self.reverse = bool(self.options.get("reverse", False))

    def run(self, x: np.ndarray, axis: np.ndarray) -> np.ndarray:
        a = int(np.asarray(axis).reshape(-1)[0])
        a = a + x.ndim if a < 0 else a
        data = np.flip(x, a) if self.reverse else x
        # np.cumsum accumulates sequentially in the input dtype, as TFLite's loop does.
        out = np.cumsum(data, axis=a, dtype=x.dtype)
        if self.exclusive:
            out = np.roll(out, 1, axis=a)
            np.moveaxis(out, a, 0)[0] = 0
        if self.reverse:
            out = np.flip(out, a)
        return np.ascontiguousarray(out).astype(self.outputs[0].dtype, copy=False)

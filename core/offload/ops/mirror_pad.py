"""MIRROR_PAD: pad by mirroring the edges, REFLECT (edge not repeated, padding < size) or
SYMMETRIC (edge repeated, padding <= size)."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._pad import pad_widths
from offload.ops._registry import register


@register
class MirrorPad(OpKernel):
    op = "MIRROR_PAD"
    max_version = 3

    def setup(self) -> None:
        mode = self.options.get("mode", "REFLECT")
        if mode not in ("REFLECT", "SYMMETRIC"):
            raise ValueError(f"expected mode REFLECT or SYMMETRIC, found {mode!r}")
        self.mode = mode.lower()
        self.edge = 1 if mode == "REFLECT" else 0

    def run(self, x: np.ndarray, paddings: np.ndarray) -> np.ndarray:
        widths = pad_widths(paddings, x.ndim)
        for dim, (lo, hi) in zip(x.shape, widths):
            if max(lo, hi) > dim - self.edge:
                raise ValueError(
                    f"{self.mode} padding {(lo, hi)} too large for a dimension of {dim}"
                )
        return np.pad(x, widths, mode=self.mode)

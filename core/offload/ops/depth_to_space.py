"""DEPTH_TO_SPACE (NHWC, DCR order): each pixel's channels become a block x block tile."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register


@register
class DepthToSpace(OpKernel):
    op = "DEPTH_TO_SPACE"
    max_version = 2

    def run(self, x: np.ndarray) -> np.ndarray:
        bs = int(self.options.block_size)
        n, h, w, c = x.shape
        if c % (bs * bs):
            raise ValueError(f"depth {c} is not a multiple of block_size**2 = {bs * bs}")
        tiles = x.reshape(n, h, w, bs, bs, c // (bs * bs)).transpose(0, 1, 3, 2, 4, 5)
        return tiles.reshape(n, h * bs, w * bs, c // (bs * bs))

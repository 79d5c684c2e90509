"""SPACE_TO_DEPTH (NHWC): each block x block tile becomes one pixel's channels."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register


@register
class SpaceToDepth(OpKernel):
    op = "SPACE_TO_DEPTH"
    max_version = 2

    def run(self, x: np.ndarray) -> np.ndarray:
        bs = int(self.options.block_size)
        n, h, w, c = x.shape
        if h % bs or w % bs:
            raise ValueError(f"height and width {h}x{w} are not multiples of block_size {bs}")
        tiles = x.reshape(n, h // bs, bs, w // bs, bs, c).transpose(0, 1, 3, 2, 4, 5)
        return tiles.reshape(n, h // bs, w // bs, bs * bs * c)

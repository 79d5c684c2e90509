"""DEPTH_TO_SPACE (NHWC, DCR order): each pixel's channels become a block x block tile."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._types import accepts


def depth_to_space_shape(shape: Shape, block_size: int) -> Shape:
    """(N, H * bs, W * bs, C / bs**2), after LiteRT's checks."""
    check_shape(len(shape) == 4, f"expected a 4-D NHWC input, found {list(shape)}")
    check_shape(block_size >= 1, f"expected block_size >= 1, found {block_size}")
    n, h, w, c = shape
    tile = block_size * block_size
    check_shape(c % tile == 0, f"expected depth a multiple of block_size**2 = {tile}, found {c}")
    return (n, h * block_size, w * block_size, c // tile)


@register
class DepthToSpace(OpKernel):
    op = "DEPTH_TO_SPACE"
    max_version = 2
    types = accepts("FLOAT32 FLOAT16 INT8 UINT8 INT32 INT64")

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return [depth_to_space_shape(ctx.shape(0), int(ctx.options.get("block_size", 0)))]

    def _run(self, x: np.ndarray) -> np.ndarray:
        bs = int(self.options.block_size)
        n, h, w, c = depth_to_space_shape(x.shape, bs)
        tiles = x.reshape(n, h // bs, w // bs, bs, bs, c).transpose(0, 1, 3, 2, 4, 5)
        return tiles.reshape(n, h, w, c)

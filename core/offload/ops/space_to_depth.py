"""SPACE_TO_DEPTH (NHWC): each block x block tile becomes one pixel's channels."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._types import accepts


def depth_shape(shape: Shape, block_size: int) -> Shape:
    """The output shape: height and width divided by the block, channels multiplied by it
    twice."""
    check_shape(len(shape) == 4, f"expected a 4-D NHWC input, found shape {list(shape)}")
    check_shape(block_size >= 1, f"expected a positive block_size, found {block_size}")
    n, h, w, c = shape
    check_shape(
        h % block_size == 0 and w % block_size == 0,
        f"expected height and width that are multiples of block_size {block_size}, found {h}x{w}",
    )
    return (n, h // block_size, w // block_size, block_size * block_size * c)


@register
class SpaceToDepth(OpKernel):
    op = "SPACE_TO_DEPTH"
    max_version = 2
    types = accepts("FLOAT32 INT8 UINT8 INT32 INT64")

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return [depth_shape(ctx.shape(0), int(ctx.options.get("block_size", 0)))]

    def _run(self, x: np.ndarray) -> np.ndarray:
        bs = int(self.options.block_size)
        n, h_out, w_out, depth = depth_shape(x.shape, bs)
        tiles = x.reshape(n, h_out, bs, w_out, bs, x.shape[3]).transpose(0, 1, 3, 2, 4, 5)
        return tiles.reshape(n, h_out, w_out, depth)

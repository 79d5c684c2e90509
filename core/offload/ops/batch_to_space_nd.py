"""BATCH_TO_SPACE_ND: move blocks of the batch back into the spatial dimensions, then crop;
the inverse of SPACE_TO_BATCH_ND."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._shape import int_list
from offload.ops._types import accepts


def _spatial_dims(shape: Shape) -> int:
    check_shape(3 <= len(shape) <= 4, f"expected a 3-D or 4-D input, found {list(shape)}")
    return len(shape) - 2


def batch_to_space_shape(shape: Shape, block: list[int], crops: list[int]) -> Shape:
    """The output shape, after LiteRT's checks: a 3-D or 4-D input, one positive block size
    per spatial dimension dividing the batch, non-negative crops that leave a size >= 0."""
    m = _spatial_dims(shape)
    check_shape(
        len(block) == m and len(crops) == 2 * m,
        f"expected {m} block sizes and {m}x2 crops, found {block} and {crops}",
    )
    check_shape(min(block) >= 1, f"expected block sizes >= 1, found {block}")
    check_shape(min(crops) >= 0, f"expected non-negative crops, found {crops}")
    check_shape(
        shape[0] % math.prod(block) == 0,
        f"expected a batch that is a multiple of the block {block}, found {shape[0]}",
    )
    spatial = tuple(shape[1 + i] * block[i] - crops[2 * i] - crops[2 * i + 1] for i in range(m))
    check_shape(
        min(spatial) >= 0,
        f"expected crops {crops} no larger than the blocked sizes of {list(shape[1:-1])}",
    )
    return (shape[0] // math.prod(block), *spatial, shape[-1])


@register
class BatchToSpaceNd(OpKernel):
    op = "BATCH_TO_SPACE_ND"
    max_version = 4
    types = accepts(
        "FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL FLOAT64 COMPLEX64 UINT16 UINT32"
    )

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        shape, block_shape, crops_shape = ctx.shape(0), ctx.shape(1), ctx.shape(2)
        m = _spatial_dims(shape)
        check_shape(
            block_shape == (m,) and crops_shape == (m, 2),
            f"expected block_shape [{m}] and crops [{m}, 2] for a rank-{len(shape)} input, "
            f"found {list(block_shape)} and {list(crops_shape)}",
        )
        block, crops = ctx.constant(1), ctx.constant(2)
        if block is None or crops is None:
            return [None]
        return [batch_to_space_shape(shape, int_list(block), int_list(crops))]

    def _run(self, x: np.ndarray, block_shape: np.ndarray, crops: np.ndarray) -> np.ndarray:
        block = int_list(block_shape)
        m = len(block)
        cut = int_list(crops)
        n = batch_to_space_shape(x.shape, block, cut)[0]
        spatial, rest = x.shape[1 : 1 + m], x.shape[1 + m :]
        # Batch index is (block offsets..., n); interleave each offset after its spatial dim.
        y = x.reshape(*block, n, *spatial, *rest)
        order = [m] + [a for i in range(m) for a in (m + 1 + i, i)] + list(range(2 * m + 1, y.ndim))
        y = y.transpose(order).reshape(n, *(s * b for s, b in zip(spatial, block)), *rest)
        index = tuple(slice(cut[2 * i], y.shape[1 + i] - cut[2 * i + 1]) for i in range(m))
        return y[(slice(None),) + index]

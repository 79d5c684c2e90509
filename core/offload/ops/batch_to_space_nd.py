"""BATCH_TO_SPACE_ND: move blocks of the batch back into the spatial dimensions, then crop;
the inverse of SPACE_TO_BATCH_ND."""

from __future__ import annotations

import math

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register
from offload.ops._shape import int_list


@register
class BatchToSpaceNd(OpKernel):
    op = "BATCH_TO_SPACE_ND"
    max_version = 4

    def run(self, x: np.ndarray, block_shape: np.ndarray, crops: np.ndarray) -> np.ndarray:
        block = int_list(block_shape)
        m = len(block)
        cut = int_list(crops)
        batch, spatial, rest = x.shape[0], x.shape[1 : 1 + m], x.shape[1 + m :]
        if batch % math.prod(block):
            raise ValueError(f"batch {batch} is not a multiple of the block {block}")
        n = batch // math.prod(block)
        # Batch index is (block offsets..., n); interleave each offset after its spatial dim.
        y = x.reshape(*block, n, *spatial, *rest)
        order = [m] + [a for i in range(m) for a in (m + 1 + i, i)] + list(range(2 * m + 1, y.ndim))
        y = y.transpose(order).reshape(n, *(s * b for s, b in zip(spatial, block)), *rest)
        index = tuple(slice(cut[2 * i], y.shape[1 + i] - cut[2 * i + 1]) for i in range(m))
        return y[(slice(None),) + index]

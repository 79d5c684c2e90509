"""SPACE_TO_BATCH_ND: pad the spatial dimensions, then move each block offset into the batch.
Quantized tensors pad with the output zero point."""

from __future__ import annotations

import math

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register
from offload.ops._shape import int_list, padded, zero_point


@register
class SpaceToBatchNd(OpKernel):
    op = "SPACE_TO_BATCH_ND"
    max_version = 4

    def setup(self) -> None:
        out = self.outputs[0]
        self.value = zero_point(out) if np.issubdtype(out.dtype, np.integer) else 0

    def run(self, x: np.ndarray, block_shape: np.ndarray, paddings: np.ndarray) -> np.ndarray:
        block = int_list(block_shape)
        m = len(block)
        pads = int_list(paddings)
        widths = [(0, 0)] + [(pads[2 * i], pads[2 * i + 1]) for i in range(m)]
        widths += [(0, 0)] * (x.ndim - 1 - m)
        y = padded(x, widths, self.value, self.outputs[0].dtype)
        n, spatial, rest = y.shape[0], y.shape[1 : 1 + m], y.shape[1 + m :]
        if any(s % b for s, b in zip(spatial, block)):
            raise ValueError(f"padded spatial shape {spatial} is not a multiple of {block}")
        split = [v for s, b in zip(spatial, block) for v in (s // b, b)]
        y = y.reshape(n, *split, *rest)
        # Output batch index is (block offsets..., n); block offsets sit at odd positions.
        order = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)]
        order += list(range(2 * m + 1, y.ndim))
        out_spatial = [s // b for s, b in zip(spatial, block)]
        return y.transpose(order).reshape(n * math.prod(block), *out_spatial, *rest)

"""SPACE_TO_BATCH_ND: pad the spatial dimensions, then move each block offset into the batch.
Quantized tensors pad with the output zero point."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._pad import pad_widths
from offload.ops._registry import register
from offload.ops._shape import int_list, padded, zero_point
from offload.ops._types import accepts


def batched_layout(
    shape: Shape, block_shape: np.ndarray, paddings: np.ndarray
) -> tuple[list[int], list[tuple[int, int]], Shape]:
    """(block, paddings of the spatial dimensions, output shape) for an input of ``shape``."""
    block = int_list(block_shape)
    m = len(block)
    check_shape(
        m < len(shape), f"expected at most {len(shape) - 1} block dimensions, found {block}"
    )
    check_shape(min(block, default=1) >= 1, f"expected a positive block shape, found {block}")
    widths = pad_widths(paddings, m)
    spatial = [d + lo + hi for d, (lo, hi) in zip(shape[1 : 1 + m], widths)]
    check_shape(
        all(s % b == 0 for s, b in zip(spatial, block)),
        f"expected padded spatial dimensions that are multiples of {block}, found {spatial}",
    )
    out = (shape[0] * math.prod(block), *(s // b for s, b in zip(spatial, block)), *shape[1 + m :])
    return block, widths, out


@register
class SpaceToBatchNd(OpKernel):
    op = "SPACE_TO_BATCH_ND"
    max_version = 4
    types = accepts(
        "FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL FLOAT64 COMPLEX64 UINT16 UINT32"
    )

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        x, block_shape, paddings = ctx.shape(0), ctx.constant(1), ctx.constant(2)
        if block_shape is None or paddings is None:
            return [None]
        return [batched_layout(x, block_shape, paddings)[2]]

    def setup(self) -> None:
        out = self.outputs[0]
        self.value = zero_point(out) if np.issubdtype(out.dtype, np.integer) else 0

    def _run(self, x: np.ndarray, block_shape: np.ndarray, paddings: np.ndarray) -> np.ndarray:
        block, widths, out_shape = batched_layout(x.shape, block_shape, paddings)
        m = len(block)
        widths = [(0, 0), *widths] + [(0, 0)] * (x.ndim - 1 - m)
        y = padded(x, widths, self.value, self.outputs[0].dtype)
        n, spatial, rest = y.shape[0], y.shape[1 : 1 + m], y.shape[1 + m :]
        split = [v for s, b in zip(spatial, block) for v in (s // b, b)]
        y = y.reshape(n, *split, *rest)
        # Output batch index is (block offsets..., n); block offsets sit at odd positions.
        order = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)]
        order += list(range(2 * m + 1, y.ndim))
        return y.transpose(order).reshape(out_shape)

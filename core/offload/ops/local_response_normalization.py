"""LOCAL_RESPONSE_NORMALIZATION: x / (bias + alpha * sum of squares over a window of
``2 * radius + 1`` channels) ** beta, along the last axis (float32)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class LocalResponseNormalization(OpKernel):
    op = "LOCAL_RESPONSE_NORMALIZATION"
    types = accepts("FLOAT32")

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        shape = ctx.shape(0)
        check_shape(len(shape) == 4, f"expected a 4-D input, found shape {list(shape)}")
        return [shape]

    def setup(self) -> None:
        self.radius = int(self.options.radius)
        self.bias = np.float32(self.options.bias)
        self.alpha = np.float32(self.options.alpha)
        self.beta = np.float32(self.options.beta)

    def _run(self, x: np.ndarray) -> np.ndarray:
        depth = x.shape[-1]
        squares = np.square(x, dtype=np.float32)
        # Window sums from a zero-prefixed cumulative sum, clipped at the channel edges.
        csum = np.concatenate(
            [np.zeros(x.shape[:-1] + (1,), np.float64), np.cumsum(squares, -1, np.float64)], -1
        )
        idx = np.arange(depth)
        lo = np.maximum(idx - self.radius, 0)
        hi = np.minimum(idx + self.radius + 1, depth)
        window = (csum[..., hi] - csum[..., lo]).astype(np.float32)
        return (x * np.power(self.bias + self.alpha * window, -self.beta)).astype(np.float32)

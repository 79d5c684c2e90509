"""SQUEEZE: drop size-1 dimensions (all of them, or those in ``squeeze_dims``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._shape import normalize_axis
from offload.ops._types import ANY_STORED, accepts


def squeezed_shape(shape: Shape, dims: Sequence[int]) -> Shape:
    """``shape`` without the size-1 dimensions in ``dims`` (every size-1 one when empty)."""
    if not dims:
        return tuple(d for d in shape if d != 1)
    axes = {normalize_axis(int(a), len(shape), "squeeze dim") for a in dims}
    for a in sorted(axes):
        check_shape(
            shape[a] == 1, f"expected dimension {a} of {list(shape)} to be 1, found {shape[a]}"
        )
    return tuple(d for i, d in enumerate(shape) if i not in axes)


@register
class Squeeze(OpKernel):
    op = "SQUEEZE"
    max_version = 2
    types = accepts(ANY_STORED)

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return [squeezed_shape(ctx.shape(0), tuple(ctx.options.get("squeeze_dims", ()) or ()))]

    def setup(self) -> None:
        self.dims = tuple(self.options.get("squeeze_dims", ()) or ())

    def _run(self, x: np.ndarray) -> np.ndarray:
        return x.reshape(squeezed_shape(x.shape, self.dims))

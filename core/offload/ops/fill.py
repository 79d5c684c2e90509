"""FILL: a tensor of shape ``dims`` (a runtime tensor in practice) holding one value."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._shape import int_list
from offload.ops._types import accepts, one_of


def fill_shape(dims: np.ndarray) -> Shape:
    shape = int_list(dims)
    # A crafted model's negative dims must not reach an allocation.
    check_shape(min(shape, default=0) >= 0, f"expected non-negative dims, found {shape}")
    return tuple(shape)


@register
class Fill(OpKernel):
    op = "FILL"
    max_version = 5
    types = accepts(
        "FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL FLOAT64 COMPLEX64 UINT16 UINT32",
        data=(1,),
        others={0: one_of("INT32 INT64")},
    )

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        dims, value = ctx.shape(0), ctx.shape(1)
        check_shape(len(dims) == 1, f"expected a 1-D dims input, found shape {list(dims)}")
        check_shape(len(value) == 0, f"expected a scalar value, found shape {list(value)}")
        known = ctx.constant(0)
        return [None if known is None else fill_shape(known)]

    def _run(self, dims: np.ndarray, value: np.ndarray) -> np.ndarray:
        return np.full(fill_shape(dims), value.reshape(-1)[0], dtype=self.outputs[0].dtype)

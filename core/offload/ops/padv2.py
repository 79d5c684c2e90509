"""PADV2: PAD with an explicit pad value (a quantized value shares the output's scale);
without one it pads like PAD."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._pad import pad_output_shape, pad_widths
from offload.ops._registry import register
from offload.ops._shape import check_one_value, padded, zero_point
from offload.ops._types import accepts


@register
class PadV2(OpKernel):
    op = "PADV2"
    max_version = 6
    types = accepts("FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL", data=(0, 2))

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        if ctx.has(2):
            check_one_value(ctx.shape(2), "pad")
        return [pad_output_shape(ctx)]

    def _run(
        self, x: np.ndarray, paddings: np.ndarray, constant: np.ndarray | None = None
    ) -> np.ndarray:
        dtype = self.outputs[0].dtype
        if constant is not None:
            value = constant.reshape(-1)[0]
        else:
            value = zero_point(self.outputs[0]) if np.issubdtype(dtype, np.integer) else 0
        return padded(x, pad_widths(paddings, x.ndim), value, dtype)

"""PAD: surround a tensor with zeros; quantized tensors pad with the output zero point, which
is the quantized zero."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._pad import pad_output_shape, pad_widths
from offload.ops._registry import register
from offload.ops._shape import padded, zero_point
from offload.ops._types import accepts


@register
class Pad(OpKernel):
    op = "PAD"
    max_version = 6
    types = accepts("FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL")

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return [pad_output_shape(ctx)]

    def setup(self) -> None:
        out = self.outputs[0]
        self.value = zero_point(out) if np.issubdtype(out.dtype, np.integer) else 0

    def _run(self, x: np.ndarray, paddings: np.ndarray) -> np.ndarray:
        return padded(x, pad_widths(paddings, x.ndim), self.value, self.outputs[0].dtype)

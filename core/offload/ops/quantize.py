"""QUANTIZE: float32 -> int8/uint8/int16 (round half away from zero, per tensor or per
channel), or requantize an integer tensor to another scale/zero point/type with TFLite's
fixed-point multiplier."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.errors import UnsupportedOpError
from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._elementwise import scale_zp
from offload.ops._quant import dtype_range, quantize, quantize_multiplier, requantize
from offload.ops._registry import register


@register
class Quantize(OpKernel):
    op = "QUANTIZE"
    max_version = 6

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return [ctx.shape(0)]

    def setup(self) -> None:
        in_t, out_t = self.inputs[0], self.outputs[0]
        assert in_t is not None
        if out_t.quantization is None or out_t.quantization.scale.size == 0:
            raise UnsupportedOpError(f"{self.node.describe()}: output has no quantization")
        self.dtype = out_t.dtype
        self.from_float = in_t.dtype.kind == "f"
        if not self.from_float:
            (si, self.zi), (so, self.zo) = scale_zp(in_t), scale_zp(out_t)
            self.multiplier, self.shift = quantize_multiplier(si / so)
            self.clamp = dtype_range(self.dtype)

    def run(self, x: np.ndarray) -> np.ndarray:  # type: ignore[override]
        out_q = self.outputs[0].quantization
        assert out_q is not None
        if self.from_float:
            # quantize() broadcasts against a (1,) scale, which would give a scalar a dimension.
            return quantize(x, out_q, self.dtype).reshape(np.shape(x))
        acc = x.astype(np.int64) - self.zi
        return requantize(acc, self.multiplier, self.shift, self.zo, self.clamp, self.dtype)

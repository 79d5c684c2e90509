"""LOG_SOFTMAX over the last axis: x - max - log(sum(exp(x - max))), in float32 as LiteRT's
optimized kernel (Eigen's exp and sum per row, :func:`offload.ops._eigen.row_exp_sums`, then
the C library's logf). A scalar has no last axis and is refused at allocate.

int8/uint8 (LiteRT's optimized path): the same in float with a table of exp(s (x - max)),
rounded half to even (``rint``) onto the fixed output scale 16/256.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._eigen import row_exp_sums
from offload.ops._elementwise import is_quantized, scale_zp
from offload.ops._libm import logf
from offload.ops._quant import dtype_range
from offload.ops._registry import register
from offload.ops._shape import not_scalar
from offload.ops._types import accepts


@register
class LogSoftmax(OpKernel):
    op = "LOG_SOFTMAX"
    max_version = 2
    types = accepts("FLOAT32", "INT8 UINT8")

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        # LiteRT's kernel reads the scalar's last dimension, dims[-1], unchecked: its float
        # path returns uninitialised memory and its int8/uint8 paths crash the process.
        return [not_scalar(ctx.shape(0))]

    def setup(self) -> None:
        self.dtype = self.outputs[0].dtype
        self.quantized = is_quantized(self.inputs[0])
        if self.quantized:
            in_t = self.inputs[0]
            assert in_t is not None
            self.in_scale = np.float32(scale_zp(in_t)[0])
            so, self.out_zp = scale_zp(self.outputs[0])
            self.out_scale = np.float32(so)
            self.table = np.exp(-self.in_scale * np.arange(256, dtype=np.float32))

    def _run(self, x: np.ndarray) -> np.ndarray:
        if self.quantized:
            return self._run_quantized(x)
        x = np.asarray(x, np.float32)
        shifted = x - x.max(axis=-1, keepdims=True)
        # LiteRT's optimized kernel, per row: std::log of Eigen's sum of Eigen's exp.
        sums = row_exp_sums(shifted.reshape(-1, x.shape[-1])).reshape(*x.shape[:-1], 1)
        return (shifted - logf(sums)).astype(self.dtype)

    def _run_quantized(self, x: np.ndarray) -> np.ndarray:
        xi = x.astype(np.int32)
        mx = xi.max(axis=-1, keepdims=True)
        log_sum = np.log(self.table[mx - xi].sum(axis=-1, keepdims=True, dtype=np.float32))
        scale = self.in_scale / self.out_scale
        pre = (self.in_scale * mx.astype(np.float32) + log_sum) / self.out_scale
        q = np.rint(scale * xi.astype(np.float32) - pre) + self.out_zp
        lo, hi = dtype_range(self.dtype)
        return np.clip(q, lo, hi).astype(self.dtype)

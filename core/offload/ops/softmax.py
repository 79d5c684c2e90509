"""SOFTMAX over the last axis: exp(beta (x - max)) / sum, in float32.

float32 is LiteRT's optimized kernel bit for bit: Eigen's packet exp and its packet-wise row
sums (:mod:`offload.ops._eigen`), then each value times 1 / sum.

int8/uint8 (LiteRT's x86 path): a float table of exp(-beta s (max - x)) indexed by the
distance to the row maximum, the float sum of the row, and rounding of each probability to
the output scale. int16 is not implemented.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.errors import UnsupportedOpError
from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._eigen import column_sums, pexp
from offload.ops._elementwise import is_quantized, scale_zp
from offload.ops._quant import dtype_range, tflite_round
from offload.ops._registry import register
from offload.ops._shape import not_scalar
from offload.ops._types import accepts


@register
class Softmax(OpKernel):
    op = "SOFTMAX"
    max_version = 3
    types = accepts("FLOAT32 FLOAT16", "INT8 UINT8 INT16")

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        # The softmax runs along the last axis, so a scalar has none (LiteRT refuses it too).
        return [not_scalar(ctx.shape(0))]

    def setup(self) -> None:
        self.beta = np.float32(self.options.get("beta", 1.0))
        self.dtype = self.outputs[0].dtype
        self.quantized = is_quantized(self.inputs[0])
        if self.quantized:
            in_t = self.inputs[0]
            assert in_t is not None
            if in_t.dtype == np.int16 or self.dtype != in_t.dtype:
                raise UnsupportedOpError(
                    f"{self.node.describe()}: quantized SOFTMAX {in_t.dtype} -> {self.dtype} "
                    "is not supported"
                )
            si, _ = scale_zp(in_t)
            self.out_scale, self.out_zp = scale_zp(self.outputs[0])
            # table[d] = exp(-s beta d) for d = max - x in 0..255, float32 as LiteRT fills it.
            scale = np.float32(-np.float32(si) * self.beta)
            self.table = np.exp(scale * np.arange(256, dtype=np.float32)).astype(np.float32)

    def _run(self, x: np.ndarray) -> np.ndarray:
        if self.quantized:
            return self._run_quantized(x)
        x = np.asarray(x, np.float32)
        if x.size == 0:
            return x.astype(self.dtype)
        rows = x.reshape(-1, x.shape[-1])
        e = pexp((rows - rows.max(axis=1, keepdims=True)) * self.beta)
        inverse = np.float32(1.0) / column_sums(e)
        return (e * inverse[:, None]).reshape(x.shape).astype(self.dtype, copy=False)

    def _run_quantized(self, x: np.ndarray) -> np.ndarray:
        xi = x.astype(np.int32)
        e = self.table[xi.max(axis=-1, keepdims=True) - xi]
        total = e.sum(axis=-1, keepdims=True, dtype=np.float32)
        inv = np.float32(1.0) / (total * np.float32(self.out_scale))
        prob = e * inv
        if self.dtype == np.uint8:
            # LiteRT's x86 build rounds uint8 probabilities by adding 0.5 and truncating.
            q = np.trunc(prob + np.float32(0.5)) + self.out_zp
        else:
            q = tflite_round(prob) + self.out_zp
        lo, hi = dtype_range(self.dtype)
        return np.clip(q, lo, hi).astype(self.dtype)

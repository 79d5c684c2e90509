"""DEQUANTIZE: int8/uint8/int16 -> float32 as ``scale * (q - zero_point)`` (per tensor or per
channel), and float16 -> float32.

Constant inputs (the fp16 weights of float16 models) are converted once at setup and the
cached array is returned on every run, as LiteRT keeps them in a persistent buffer.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._quant import dequantize, scale_zp
from offload.ops._registry import register


@register
class Dequantize(OpKernel):
    op = "DEQUANTIZE"
    max_version = 6

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return [ctx.shape(0)]

    def setup(self) -> None:
        self.dtype = self.outputs[0].dtype
        value = self.constant(0)
        self.cached = None if value is None else self._convert(value)
        if self.cached is not None:
            self.cached.setflags(write=False)

    def _convert(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        if x.dtype.kind == "f":
            return x.astype(self.dtype)
        in_t = self.inputs[0]
        assert in_t is not None
        q = in_t.quantization
        if q is not None and not q.per_channel:
            return self._per_tensor(x, *scale_zp(in_t))
        return dequantize(x, q).astype(self.dtype, copy=False)

    def _per_tensor(self, x: np.ndarray, scale: float, zp: int) -> np.ndarray:
        # LiteRT's x86 build runs the NEON path (through its SSE emulation): blocks of 8 as
        # float32 ``q * scale + (-zp * scale)``, the remaining tail as ``scale * (q - zp)`` in
        # double. The two round differently, so both are reproduced.
        flat = x.reshape(-1).astype(np.int64)
        head = flat.size - flat.size % 8
        out = np.empty(flat.size, np.float32)
        out[:head] = flat[:head].astype(np.float32) * np.float32(scale) + np.float32(-zp * scale)
        out[head:] = (scale * (flat[head:] - zp).astype(np.float64)).astype(np.float32)
        return out.reshape(x.shape).astype(self.dtype, copy=False)

    def run(self, x: np.ndarray) -> np.ndarray:  # type: ignore[override]
        if self.cached is not None:
            # A variable output (an LSTM state initialised from a constant) is updated in place
            # by its consumer, so it must get a fresh writable copy, not the shared cache.
            return self.cached.copy() if self.outputs[0].is_variable else self.cached
        return self._convert(x)

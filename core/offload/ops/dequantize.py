"""DEQUANTIZE: int8/uint8/int16 -> float32 as ``scale * (q - zero_point)`` (per tensor or per
channel), and float16 -> float32.

Constant inputs (the fp16 weights of float16 models) are converted once at setup and the
cached array is returned on every run, as LiteRT keeps them in a persistent buffer. Other
float32 outputs are written into the output's arena slot.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._quant import dequantize, scale_zp
from offload.ops._registry import register
from offload.ops._types import accepts, one_of


@register
class Dequantize(OpKernel):
    op = "DEQUANTIZE"
    max_version = 6
    types = accepts("FLOAT16", "INT4 INT8 UINT8 INT16", output=one_of("FLOAT32"))

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return [ctx.shape(0)]

    def setup(self) -> None:
        self.dtype = self.outputs[0].dtype
        in_t = self.inputs[0]
        q = None if in_t is None else in_t.quantization
        self._per_tensor_q = None if q is None or q.per_channel else scale_zp(in_t)
        value = self.constant(0)
        self.cached = None if value is None else self._convert(value)
        if self.cached is not None:
            self.cached.setflags(write=False)
        self.writes_into = self.cached is None and self.dtype == np.float32

    def _convert(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        x = np.asarray(x)
        if x.dtype.kind == "f":
            return x.astype(self.dtype)
        if self._per_tensor_q is not None:
            return self._per_tensor(x, *self._per_tensor_q, out)
        in_t = self.inputs[0]
        assert in_t is not None
        return dequantize(x, in_t.quantization).astype(self.dtype, copy=False)

    @staticmethod
    def _tail(q: np.ndarray, scale: float, zp: int) -> np.ndarray:
        """The scalar tail's rule: ``scale * (q - zp)`` in double."""
        return (scale * (q.astype(np.int64) - zp).astype(np.float64)).astype(np.float32)

    def _per_tensor(
        self, x: np.ndarray, scale: float, zp: int, out: np.ndarray | None
    ) -> np.ndarray:
        # LiteRT's x86 build runs the NEON path (through its SSE emulation): blocks of 8 by one
        # rule, the remaining tail by another; they round differently, so both are reproduced.
        # The blocks' rule, float32 ``q * scale + (-zp * scale)``, is two passes with the
        # exact int -> float32 cast inside the first: faster than a gather from a table.
        flat = x.reshape(-1)
        head = flat.size - flat.size % 8
        if not self.fits(out, x.shape, np.dtype(np.float32)):
            out = np.empty(x.shape, np.float32)
        assert out is not None
        result = out.reshape(-1)
        blocks = result[:head]
        np.multiply(flat[:head], np.float32(scale), out=blocks, dtype=np.float32)
        np.add(blocks, np.float32(-zp * scale), out=blocks)
        if head < flat.size:
            result[head:] = self._tail(flat[head:], scale, zp)
        return out.astype(self.dtype, copy=False)

    def _run(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if self.cached is not None:
            # A variable output (an LSTM state initialised from a constant) is updated in place
            # by its consumer, so it must get a fresh writable copy, not the shared cache.
            return self.cached.copy() if self.outputs[0].is_variable else self.cached
        return self._convert(x, out)

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
        in_t = self.inputs[0]
        q = None if in_t is None else in_t.quantization
        # Per-tensor 8-bit codes: both rules tabulated over the 256 codes, once.
        self._tables: tuple[np.ndarray, np.ndarray] | None = None
        if q is not None and not q.per_channel and in_t.dtype.itemsize == 1:
            scale, zp = scale_zp(in_t)
            codes = np.arange(256, dtype=np.uint8).view(in_t.dtype)
            self._tables = (self._blocks(codes, scale, zp), self._tail(codes, scale, zp))
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

    @staticmethod
    def _blocks(q: np.ndarray, scale: float, zp: int) -> np.ndarray:
        """The NEON blocks' rule: float32 ``q * scale + (-zp * scale)``."""
        return q.astype(np.float32) * np.float32(scale) + np.float32(-zp * scale)

    @staticmethod
    def _tail(q: np.ndarray, scale: float, zp: int) -> np.ndarray:
        """The scalar tail's rule: ``scale * (q - zp)`` in double."""
        return (scale * (q.astype(np.int64) - zp).astype(np.float64)).astype(np.float32)

    def _per_tensor(self, x: np.ndarray, scale: float, zp: int) -> np.ndarray:
        # LiteRT's x86 build runs the NEON path (through its SSE emulation): blocks of 8 by one
        # rule, the remaining tail by another; they round differently, so both are reproduced.
        flat = x.reshape(-1)
        head = flat.size - flat.size % 8
        out = np.empty(flat.size, np.float32)
        if self._tables is not None and flat.dtype.itemsize == 1:
            index = flat.view(np.uint8)
            np.take(self._tables[0], index[:head], out=out[:head])
            np.take(self._tables[1], index[head:], out=out[head:])
        else:
            out[:head] = self._blocks(flat[:head], scale, zp)
            out[head:] = self._tail(flat[head:], scale, zp)
        return out.reshape(x.shape).astype(self.dtype, copy=False)

    def run(self, x: np.ndarray) -> np.ndarray:  # type: ignore[override]
        if self.cached is not None:
            # A variable output (an LSTM state initialised from a constant) is updated in place
            # by its consumer, so it must get a fresh writable copy, not the shared cache.
            return self.cached.copy() if self.outputs[0].is_variable else self.cached
        return self._convert(x)

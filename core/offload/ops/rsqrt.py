"""RSQRT: 1 / sqrt(x) in float32; int16 through TFLite's lookup table (inputs <= 0 give the
largest output). int8 uses a fixed-point Newton iteration in TFLite, not implemented here."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import QuantizedFn, UnaryOp, scale_zp
from offload.ops._registry import register
from offload.ops._types import accepts


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return np.float32(1.0) / np.sqrt(x)


@register
class Rsqrt(UnaryOp):
    op = "RSQRT"
    max_version = 3
    types = accepts("FLOAT32 FLOAT16", "INT8 INT16")
    fn = staticmethod(_rsqrt)

    def quantized(self) -> QuantizedFn | None:
        if self.dtype != np.int16:
            return None
        so, _ = scale_zp(self.outputs[0])
        top = np.float32(32767) * np.float32(so)

        def rsqrt_or_top(v: np.ndarray) -> np.ndarray:
            return np.where(v <= 0, top, np.float32(1.0) / np.sqrt(np.maximum(v, 1e-38)))

        return self.float_lut(rsqrt_or_top)

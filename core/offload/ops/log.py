"""LOG: natural log; float32 is the C library's logf, which LiteRT's kernel calls through
std::log (:mod:`offload.ops._libm`); int8/int16 through TFLite's lookup table, where inputs <= 0
map to the lowest representable output."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import QuantizedFn, UnaryOp, scale_zp
from offload.ops._libm import logf
from offload.ops._quant import dtype_range
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class Log(UnaryOp):
    op = "LOG"
    max_version = 2
    types = accepts("FLOAT32 FLOAT16", "INT8 INT16")
    fn = staticmethod(logf)

    def quantized(self) -> QuantizedFn:
        so, zo = scale_zp(self.outputs[0])
        lowest = np.float32((dtype_range(self.dtype)[0] - zo) * np.float32(so))

        def log_or_lowest(v: np.ndarray) -> np.ndarray:
            return np.where(v <= 0, lowest, np.log(np.maximum(v, np.float32(1e-38))))

        return self.float_lut(log_or_lowest)

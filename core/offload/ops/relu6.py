"""RELU6: clamp(x, 0, 6); quantized: rescale to the output scale, clamp to [0, 6] in output
quanta."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import QuantizedFn, UnaryOp, relu_x_lut
from offload.ops._registry import register
from offload.ops._types import accepts


def _clamp(x: np.ndarray) -> np.ndarray:
    return np.clip(x, x.dtype.type(0.0), x.dtype.type(6.0))


@register
class Relu6(UnaryOp):
    op = "RELU6"
    max_version = 3
    types = accepts("FLOAT32 FLOAT16", "INT8 UINT8 INT16")
    fn = staticmethod(_clamp)

    def quantized(self) -> QuantizedFn:
        assert self.inputs[0] is not None
        return relu_x_lut(self.inputs[0], self.outputs[0], 0.0, 6.0)

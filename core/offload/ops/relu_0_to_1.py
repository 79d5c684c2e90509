"""RELU_0_TO_1: clamp(x, 0, 1); quantized: rescale, clamp to [0, 1] in output quanta."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import QuantizedFn, UnaryOp, relu_x_lut
from offload.ops._registry import register
from offload.ops._types import accepts


def _clamp(x: np.ndarray) -> np.ndarray:
    return np.clip(x, x.dtype.type(0.0), x.dtype.type(1.0))


@register
class Relu0To1(UnaryOp):
    op = "RELU_0_TO_1"
    max_version = 1
    types = accepts("FLOAT32", "INT8 UINT8")
    fn = staticmethod(_clamp)

    def quantized(self) -> QuantizedFn:
        assert self.inputs[0] is not None
        return relu_x_lut(self.inputs[0], self.outputs[0], 0.0, 1.0)

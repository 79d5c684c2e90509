"""RELU: max(x, 0); quantized: rescale to the output scale, clamp at the output's zero."""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import QuantizedFn, UnaryOp, relu_x_lut
from offload.ops._registry import register


def _clamp(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, x.dtype.type(0.0))


@register
class Relu(UnaryOp):
    op = "RELU"
    max_version = 3
    fn = staticmethod(_clamp)

    def quantized(self) -> QuantizedFn:
        assert self.inputs[0] is not None
        return relu_x_lut(self.inputs[0], self.outputs[0], 0.0, None)

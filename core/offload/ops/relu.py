"""RELU: max(x, 0); quantized: rescale to the output scale, clamp at the output's zero."""

from __future__ import annotations

from offload.ops._activation import relu
from offload.ops._elementwise import QuantizedFn, UnaryOp, relu_x_lut
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class Relu(UnaryOp):
    op = "RELU"
    max_version = 3
    types = accepts("FLOAT32 FLOAT16", "INT8 UINT8 INT16")
    fn = staticmethod(relu)

    def quantized(self) -> QuantizedFn:
        assert self.inputs[0] is not None
        return relu_x_lut(self.inputs[0], self.outputs[0], 0.0, None)

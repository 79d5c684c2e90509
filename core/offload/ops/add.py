"""ADD: a + b with broadcasting and a fused activation; quantized via TFLite's shifted sum.

int8 runs LiteRT's optimized kernels, on x86 NEON code through NEON_2_SSE: AddElementwiseInt8
(same shapes, and the inner runs of a broadcast) shifts each input left by 20 plus its
multiplier's exponent *before* its rounding doubling high multiply, 16 elements at a time;
AddScalarBroadcast (inner runs against one broadcast value) applies the exponent as a
truncating shift after the multiply, 8 at a time; the elements left over in each run, and the
broadcasts no fivefold loop covers, go through the reference, which rounds twice.

The rules and the walk are :func:`offload.quant.add_int8`, shared with delegates.
"""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import BinaryOp, QuantizedFn, _quant_clamp, add_sub_quantized
from offload.ops._registry import register
from offload.ops._types import accepts
from offload.quant import add_int8, add_params


@register
class Add(BinaryOp):
    op = "ADD"
    max_version = 6
    types = accepts("FLOAT32 FLOAT16 INT16 INT32 INT64", "INT8 UINT8", data=(0, 1))
    fn = staticmethod(np.add)
    fused = True
    clamp_float = True

    def quantized(self) -> QuantizedFn:
        in1, in2, out = self.inputs[0], self.inputs[1], self.outputs[0]
        if out.dtype != np.int8 or in1 is None or in2 is None:
            return add_sub_quantized(self, +1)
        params = add_params(in1, in2, out)
        clamp = _quant_clamp(out, self.activation)
        add_int8(np.zeros(1, np.int8), np.zeros(1, np.int8), params, clamp)  # tables, now

        def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            return add_int8(a, b, params, clamp)

        return run

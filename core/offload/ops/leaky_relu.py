"""LEAKY_RELU: x for x > 0, alpha * x otherwise.

Quantized: the non-negative side is rescaled by ``s_in / s_out``, the negative side by
``alpha s_in / s_out`` (its sign applied after the fixed-point multiply), then offset and
clamped.
"""

from __future__ import annotations

import numpy as np

from offload.ops._elementwise import QuantizedFn, UnaryOp, scale_zp
from offload.ops._lut import Lut, lut_from_int
from offload.ops._quant import multiply_by_quantized_multiplier, quantize_multiplier
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class LeakyRelu(UnaryOp):
    op = "LEAKY_RELU"
    max_version = 2
    types = accepts("FLOAT32 FLOAT16", "INT8 UINT8 INT16")

    def setup(self) -> None:
        self.alpha = np.float32(self.options.get("alpha", 0.2))
        super().setup()

    def quantized(self) -> QuantizedFn:
        (si, zi), (so, zo) = scale_zp(self.inputs[0]), scale_zp(self.outputs[0])
        m_alpha, sh_alpha = quantize_multiplier(si * float(self.alpha) / so)
        m_id, sh_id = quantize_multiplier(si / so)
        sign = -1 if m_alpha < 0 else 1

        def rule(v: np.ndarray) -> np.ndarray:
            d = v - zi
            pos = multiply_by_quantized_multiplier(d, m_id, sh_id)
            neg = sign * multiply_by_quantized_multiplier(d, abs(m_alpha), sh_alpha)
            return zo + np.where(d >= 0, pos, neg)

        return Lut(lut_from_int(rule, self.dtype))

    def _run(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        # ``out`` is UnaryOp's; never given here, as writes_into holds only for UnaryOp.run.
        if self._quantized is not None:
            return self._quantized(x)
        return np.where(x > 0, x, x * self.alpha).astype(self.dtype, copy=False)

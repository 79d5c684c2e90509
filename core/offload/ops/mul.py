"""MUL: a * b with broadcasting and a fused activation.

Quantized: the product of the zero-point-corrected inputs is rescaled once by the combined
multiplier ``s1 * s2 / s_out``. For 8-bit inputs the product depends only on the pair of codes,
so the rule is tabulated once over all 65536 pairs and a run is one gather per element.
"""

from __future__ import annotations

import numpy as np

from offload.errors import UnsupportedOpError
from offload.ops._elementwise import BinaryOp, QuantizedFn, scale_zp
from offload.ops._quant import activation_range_quantized, quantize_multiplier, requantize
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class Mul(BinaryOp):
    op = "MUL"
    max_version = 8
    types = accepts("FLOAT32 FLOAT16 INT16 INT32 INT64 COMPLEX64 UINT32", "INT8 UINT8", data=(0, 1))
    fn = staticmethod(np.multiply)
    fused = True
    clamp_float = True

    def quantized(self) -> QuantizedFn:
        in1, in2, out = self.inputs[0], self.inputs[1], self.outputs[0]
        assert in1 is not None and in2 is not None and out.quantization is not None
        if not (in1.dtype == in2.dtype == out.dtype):
            raise UnsupportedOpError(
                f"{self.node.describe()}: quantized MUL with {in1.dtype} inputs and "
                f"{out.dtype} output is not supported"
            )
        (s1, z1), (s2, z2), (so, zo) = scale_zp(in1), scale_zp(in2), scale_zp(out)
        # In float32, as mul.cc forms it: the product of two small scales is subnormal there
        # and loses bits that a double keeps, and LiteRT's answer follows the float.
        with np.errstate(over="ignore"):
            real = float(np.float32(s1) * np.float32(s2) / np.float32(so))
        if not np.isfinite(real):
            raise UnsupportedOpError(
                f"{self.node.describe()}: expected a finite multiplier input scales / output "
                f"scale in float32, found {real} from input scales {s1!r} and {s2!r}, output "
                f"scale {so!r}"
            )
        m, sh = quantize_multiplier(real)
        clamp = activation_range_quantized(self.activation, out.quantization, out.dtype)
        dtype = out.dtype

        def rule(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            acc = (a.astype(np.int64) - z1) * (b.astype(np.int64) - z2)
            return requantize(acc, m, sh, zo, clamp, dtype)

        if np.dtype(dtype).itemsize != 1:
            return rule
        # Indexed by (a's byte << 8) | b's byte.
        codes = np.arange(256, dtype=np.uint8).view(dtype)
        grid_a, grid_b = (g.reshape(-1) for g in np.meshgrid(codes, codes, indexing="ij"))
        table = rule(grid_a, grid_b)

        def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            return table[(a.view(np.uint8).astype(np.intp) << 8) | b.view(np.uint8)]

        return run

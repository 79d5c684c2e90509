"""QUANTIZE: float32 -> int8/uint8/int16 (per tensor or per channel), or requantize an integer
tensor to another scale/zero point/type with TFLite's fixed-point multiplier.

Per tensor, LiteRT's optimized AffineQuantize runs on x86 as its NEON code through NEON_2_SSE:
blocks of 8 as ``x * float32(1 / scale)`` rounded to nearest even, the tail one by one as
``round(x / scale)`` in double, halves away from zero. Per channel it runs the reference, the
rule of :func:`offload.quant.quantize`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.errors import UnsupportedOpError
from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._elementwise import scale_zp
from offload.ops._quant import (
    dtype_range,
    quantize,
    quantize_multiplier,
    requantize,
    round_half_away_f32,
)
from offload.ops._registry import register
from offload.ops._types import accepts, one_of

# Values AffineQuantize converts per NEON vector pair before its scalar tail loop.
_LANES = 8
# The output types' ranges, looked up once: np.iinfo costs microseconds on every small tensor.
_RANGES = {np.dtype(t): dtype_range(t) for t in (np.int8, np.uint8, np.int16)}


def affine_quantize(
    x: np.ndarray,
    scale: np.float32,
    zero_point: int,
    dtype: np.dtype,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """optimized_ops::AffineQuantize on x86 (see the module docstring), into ``out`` when it is
    a C-contiguous array of the right size and type. A value whose rounded quotient leaves
    int32 (or NaN) converts to INT32_MIN, as x86's conversions do, and so clamps to the type's
    minimum."""
    flat = np.asarray(x, np.float32).reshape(-1)
    lanes = flat.size // _LANES * _LANES
    rounded = np.empty(flat.size, np.float32)  # whole numbers: exact while in range
    head = rounded[:lanes]
    np.multiply(flat[:lanes], np.float32(1.0 / np.float64(scale)), out=head)
    np.rint(head, out=head)
    if lanes < flat.size:
        tail = flat[lanes:].astype(np.float64) / np.float64(scale)
        rounded[lanes:] = round_half_away_f32(tail)
    lo, hi = _RANGES.get(dtype) or dtype_range(dtype)
    # NaN as well; below -2**31 clamps anyway. The maximum (NaN if any is) is one fast read,
    # so the element-wise test runs only when something is out of range.
    out_of_range = None
    if rounded.size and not rounded.max() < np.float32(2.0**31):
        out_of_range = ~(rounded < np.float32(2.0**31))
    rounded += np.float32(zero_point)
    rounded.clip(lo, hi, out=rounded)
    if out_of_range is not None:
        rounded[out_of_range] = lo
    shape = np.shape(x)
    if out is None or out.shape != shape or out.dtype != dtype or not out.flags.c_contiguous:
        out = np.empty(shape, dtype)
    np.copyto(out.reshape(-1), rounded, casting="unsafe")  # whole numbers in range: exact
    return out


@register
class Quantize(OpKernel):
    op = "QUANTIZE"
    max_version = 6
    types = accepts(
        "FLOAT32 FLOAT16", "INT8 UINT8 INT16", output=one_of(quantized="INT8 UINT8 INT16")
    )
    writes_into = True

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return [ctx.shape(0)]

    def setup(self) -> None:
        in_t, out_t = self.inputs[0], self.outputs[0]
        assert in_t is not None
        if out_t.quantization is None or out_t.quantization.scale.size == 0:
            raise UnsupportedOpError(f"{self.node.describe()}: output has no quantization")
        self.dtype = out_t.dtype
        self.from_float = in_t.dtype.kind == "f"
        # AffineQuantize has optimized int8/uint8/int16 paths; other types run the reference.
        self.affine = (
            self.from_float
            and not out_t.quantization.per_channel
            and self.dtype in (np.int8, np.uint8, np.int16)
        )
        if self.affine:
            self.scale, self.zero_point = (
                out_t.quantization.scale.astype(np.float32)[0],
                int(out_t.quantization.zero_point[0]),
            )
        if not self.from_float:
            (si, self.zi), (so, self.zo) = scale_zp(in_t), scale_zp(out_t)
            self.multiplier, self.shift = quantize_multiplier(si / so)
            self.clamp = dtype_range(self.dtype)

    def _run(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        out_q = self.outputs[0].quantization
        assert out_q is not None
        if self.affine:
            return affine_quantize(x, self.scale, self.zero_point, self.dtype, out)
        if self.from_float:
            # quantize() broadcasts against a (1,) scale, which would give a scalar a dimension.
            return quantize(x, out_q, self.dtype).reshape(np.shape(x))
        acc = x.astype(np.int64) - self.zi
        return requantize(acc, self.multiplier, self.shift, self.zo, self.clamp, self.dtype)

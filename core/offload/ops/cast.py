"""CAST between numeric types and bool, as LiteRT's kernel: floats truncate toward zero and
saturate to the integer type's range (NaN to its maximum), integers wrap, nonzero -> true,
complex -> its real part."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._registry import register
from offload.ops._types import accepts, one_of

# The types CAST converts between; BFLOAT16 and INT4, which offload holds as raw uint16 and
# int8, would convert as bit patterns, so they are refused rather than cast wrong.
_CASTABLE = (
    "FLOAT32 FLOAT16 FLOAT64 INT8 UINT8 INT16 UINT16 INT32 UINT32 INT64 UINT64 BOOL COMPLEX64"
)


@register
class Cast(OpKernel):
    op = "CAST"
    max_version = 7
    types = accepts(_CASTABLE, output=one_of(_CASTABLE))

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return [ctx.shape(0)]

    def _run(self, x: np.ndarray) -> np.ndarray:
        dtype = self.outputs[0].dtype
        x = np.asarray(x)
        if x.dtype.kind == "c" and dtype.kind != "c":
            x = x.real
        if dtype == np.bool_:
            return x != 0
        if x.dtype.kind == "f" and dtype.kind in "iu":
            return _saturated(x, dtype)
        with np.errstate(invalid="ignore", over="ignore"):
            return x.astype(dtype)


def _saturated(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Float to integer as LiteRT casts: out-of-range values (infinities too) to the nearest
    end of the range, NaN to the maximum (measured on LiteRT 2.3's builtin and XNNPACK paths;
    a bare astype gives INT_MIN or wraps)."""
    info = np.iinfo(dtype)
    wide = x.astype(np.float64)
    # Both ends are exact in float64: min is -2**k (or 0), max + 1 is 2**k.
    high = wide >= float(info.max) + 1.0
    low = wide < float(info.min)
    nan = np.isnan(wide)
    inside = np.where(high | low | nan, 0.0, wide)
    out = inside.astype(dtype)
    out[high | nan] = info.max
    out[low] = info.min
    return out

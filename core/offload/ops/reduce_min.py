"""REDUCE_MIN: minimum over the given axes; quantized inputs keep their scale.

Floats follow LiteRT's optimized kernel, NaN and signed zeros included
(:func:`~offload.ops._reduce.float_extreme`).
"""

from __future__ import annotations

import numpy as np

from offload.ops._reduce import ReduceKernel, float_extreme
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class ReduceMin(ReduceKernel):
    op = "REDUCE_MIN"
    max_version = 3
    types = accepts("FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64")

    def empty_value(self) -> object:
        if np.issubdtype(self.out_dtype, np.floating):
            return np.finfo(self.out_dtype).max
        return np.iinfo(self.out_dtype).max

    def reduce(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        if x.dtype.kind == "f":
            return float_extreme(x, axes, minimum=True)
        return np.min(x, axis=axes, keepdims=True)

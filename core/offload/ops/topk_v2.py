"""TOPK_V2: the ``k`` largest values of each last-axis row and their indices, largest first;
ties keep the lower index first and NaN ranks below every number, as in TFLite."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register
from offload.ops._shape import scalar_int


@register
class TopKV2(OpKernel):
    op = "TOPK_V2"
    max_version = 3

    def run(self, x: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        count = max(scalar_int(k), 0)
        if x.ndim < 1 or count > x.shape[-1]:
            raise ValueError(f"k = {count} exceeds the last dimension of {x.shape}")
        # A stable ascending sort of the negated values: ties stay in index order, and NaN
        # (negated, still NaN) sorts last. Widen first so -(-128) cannot overflow.
        wide = x.astype(np.float64 if np.issubdtype(x.dtype, np.floating) else np.int64)
        order = np.argsort(-wide, axis=-1, kind="stable")[..., :count]
        values = np.take_along_axis(x, order, axis=-1)
        return values, order.astype(self.outputs[1].dtype)

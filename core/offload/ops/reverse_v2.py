"""REVERSE_V2: flip the tensor along the given axes (TFLite accepts only contiguous axes)."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register
from offload.ops._shape import int_list, normalize_axis


@register
class ReverseV2(OpKernel):
    op = "REVERSE_V2"
    max_version = 4

    def run(self, x: np.ndarray, axis: np.ndarray) -> np.ndarray:
        axes = sorted({normalize_axis(a, x.ndim) for a in int_list(axis)})
        if axes and axes[-1] - axes[0] != len(axes) - 1:
            raise ValueError(f"expected contiguous axes (as LiteRT), found {axes}")
        return np.flip(x, axis=tuple(axes)) if axes else x

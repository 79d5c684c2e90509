"""REDUCE_ANY: logical or over the given axes (bool)."""

from __future__ import annotations

import numpy as np

from offload.ops._reduce import ReduceKernel
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class ReduceAny(ReduceKernel):
    op = "REDUCE_ANY"
    types = accepts("BOOL")

    def empty_value(self) -> object:
        return False

    def reduce(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        return np.any(x, axis=axes, keepdims=True)

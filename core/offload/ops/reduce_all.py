"""REDUCE_ALL: logical and over the given axes (bool)."""

from __future__ import annotations

import numpy as np

from offload.ops._reduce import ReduceKernel
from offload.ops._registry import register
from offload.ops._types import accepts


@register
class ReduceAll(ReduceKernel):
    op = "REDUCE_ALL"
    types = accepts("BOOL")

    def empty_value(self) -> object:
        return True

    def reduce(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        return np.all(x, axis=axes, keepdims=True)

"""FILL: a tensor of shape ``dims`` (a runtime tensor in practice) holding one value."""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register
from offload.ops._shape import int_list


@register
class Fill(OpKernel):
    op = "FILL"
    max_version = 5

    def run(self, dims: np.ndarray, value: np.ndarray) -> np.ndarray:
        shape = int_list(dims)
        if any(d < 0 for d in shape):
            raise ValueError(f"expected non-negative dims, found {shape}")
        return np.full(shape, value.reshape(-1)[0], dtype=self.outputs[0].dtype)

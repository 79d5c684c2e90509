"""L2_NORMALIZATION: divide each vector along the last axis by its L2 norm (float32)."""

from __future__ import annotations

import numpy as np

from offload.errors import UnsupportedOpError
from offload.ops._base import OpKernel
from offload.ops._registry import register

# LiteRT's fixed guard against a zero norm (not an option of the op).
_EPSILON = np.float32(1e-6)


@register
class L2Normalization(OpKernel):
    op = "L2_NORMALIZATION"
    max_version = 1

    def setup(self) -> None:
        if self.outputs[0].dtype != np.float32:
            raise UnsupportedOpError(
                f"{self.node.describe()}: expected a float32 L2_NORMALIZATION, found "
                f"{self.outputs[0].type_name}; the quantized variant is not implemented yet"
            )

    def run(self, x: np.ndarray) -> np.ndarray:
        squares = np.add.reduce(x * x, axis=-1, keepdims=True, dtype=np.float32)
        norm = np.maximum(np.sqrt(squares), _EPSILON)
        return (x / norm).astype(np.float32)

"""L2_NORMALIZATION: divide each vector along the last axis by its L2 norm (float32)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.errors import UnsupportedOpError
from offload.ops._base import OpKernel, Shape, ShapeContext
from offload.ops._reduce import sequential
from offload.ops._registry import register
from offload.ops._shape import not_scalar
from offload.ops._types import accepts

# LiteRT's fixed guard against a zero norm (not an option of the op).
_EPSILON = np.float32(1e-6)


@register
class L2Normalization(OpKernel):
    op = "L2_NORMALIZATION"
    max_version = 1
    types = accepts("FLOAT32", "INT8 UINT8")

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return [not_scalar(ctx.shape(0))]

    def setup(self) -> None:
        if self.outputs[0].dtype != np.float32:
            raise UnsupportedOpError(
                f"{self.node.describe()}: expected a float32 L2_NORMALIZATION, found "
                f"{self.outputs[0].type_name}; the quantized variant is not implemented yet"
            )

    def _run(self, x: np.ndarray) -> np.ndarray:
        # LiteRT's loop adds the squares of each vector in order (numpy would pair them).
        squares = sequential(np.add, np.asarray(x * x, np.float32), (x.ndim - 1,))
        norm = np.maximum(np.sqrt(squares), _EPSILON)
        return (x / norm).astype(np.float32)

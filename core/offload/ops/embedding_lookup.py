"""EMBEDDING_LOOKUP: gather rows of a table by index; an int8 table with a float output is
dequantized row by row (per-tensor or per-row scale), as LiteRT's hybrid path does."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._types import accepts, one_of


def lookup_shape(ids: Shape, table: Shape) -> Shape:
    """One table row per id: LiteRT takes a 1-D ids vector and a table of rank >= 2."""
    check_shape(len(ids) == 1, f"expected a 1-D vector of lookup ids, found shape {list(ids)}")
    check_shape(len(table) >= 2, f"expected a table of rank >= 2, found shape {list(table)}")
    return (ids[0], *table[1:])


@register
class EmbeddingLookup(OpKernel):
    op = "EMBEDDING_LOOKUP"
    max_version = 3
    types = accepts(
        "FLOAT32 INT8 UINT8 INT4",
        data=(1,),
        output=one_of("FLOAT32 FLOAT16 INT8 UINT8"),
        others={0: one_of("INT32")},
    )

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        return [lookup_shape(ctx.shape(0), ctx.shape(1))]

    def setup(self) -> None:
        table = self.input_tensor(1)
        out = self.outputs[0]
        self.hybrid = table.dtype != out.dtype and out.dtype in (np.float32, np.float16)
        # The hybrid path's dequantization scale(s); only that path reads it.
        self.scale: np.float32 | np.ndarray = np.float32(1.0)
        if self.hybrid:
            q = table.quantization
            self.scale = np.float32(1.0) if q is None else q.scale.astype(np.float32)

    def _run(self, ids: np.ndarray, table: np.ndarray) -> np.ndarray:
        lookup_shape(np.shape(ids), table.shape)
        ids = np.asarray(ids)
        if ids.size and (ids.min() < 0 or ids.max() >= table.shape[0]):
            raise IndexError(
                f"expected lookup ids in [0, {table.shape[0] - 1}], found "
                f"[{int(ids.min())}, {int(ids.max())}]"
            )
        rows = table[ids]
        if not self.hybrid:
            return rows.astype(self.outputs[0].dtype, copy=False)
        # LiteRT reads the table as int8 whatever its declared 8-bit type.
        values = rows.view(np.int8) if rows.dtype == np.uint8 else rows
        scale = self.scale
        if isinstance(scale, np.ndarray) and scale.ndim and scale.size > 1:
            scale = scale[ids]
        scale = np.reshape(scale, (-1,) + (1,) * (rows.ndim - 1)) if np.ndim(scale) else scale
        return (values.astype(np.float32) * scale).astype(self.outputs[0].dtype)

"""MIRROR_PAD: pad by mirroring the edges, REFLECT (edge not repeated, padding < size) or
SYMMETRIC (edge repeated, padding <= size)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._pad import pad_widths, padded_shape
from offload.ops._registry import register
from offload.ops._types import accepts


def mirror_mode(options: Mapping[str, Any]) -> str:
    mode = options.get("mode", "REFLECT")
    check_shape(
        mode in ("REFLECT", "SYMMETRIC"), f"expected mode REFLECT or SYMMETRIC, found {mode!r}"
    )
    return mode


def mirror_widths(shape: Shape, paddings: np.ndarray, mode: str) -> list[tuple[int, int]]:
    """(before, after) per dimension, each at most the dimension's size (less 1 for REFLECT)."""
    widths = pad_widths(paddings, len(shape))
    edge = 1 if mode == "REFLECT" else 0
    for dim, (lo, hi) in zip(shape, widths):
        check_shape(
            max(lo, hi) <= dim - edge,
            f"expected {mode} paddings of at most {dim - edge} for a dimension of {dim}, "
            f"found {(lo, hi)}",
        )
    return widths


@register
class MirrorPad(OpKernel):
    op = "MIRROR_PAD"
    max_version = 3
    types = accepts(
        "FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL FLOAT64 COMPLEX64 UINT16 UINT32"
    )

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        mode = mirror_mode(ctx.options)
        shape, matrix = ctx.shape(0), ctx.shape(1)
        check_shape(
            matrix == (len(shape), 2),
            f"expected paddings of shape [{len(shape)}, 2], found {list(matrix)}",
        )
        paddings = ctx.constant(1)
        if paddings is None:
            return [None]
        mirror_widths(shape, paddings, mode)
        return [padded_shape(shape, paddings)]

    def setup(self) -> None:
        self.mode = mirror_mode(self.options)

    def _run(self, x: np.ndarray, paddings: np.ndarray) -> np.ndarray:
        widths = mirror_widths(x.shape, paddings, self.mode)
        if not widths:
            return np.array(x)  # a scalar has nothing to pad, and np.pad refuses one
        return np.pad(x, widths, mode="reflect" if self.mode == "REFLECT" else "symmetric")

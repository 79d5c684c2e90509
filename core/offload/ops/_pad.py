"""The paddings input shared by PAD, PADV2 and MIRROR_PAD: an (rank, 2) matrix of
(before, after) counts, possibly computed at run time."""

from __future__ import annotations

import numpy as np

from offload.ops._base import Shape, ShapeContext
from offload.ops._shape import int_list

__all__ = ["pad_widths", "padded_shape", "pad_output_shape"]


def pad_widths(paddings: np.ndarray, rank: int) -> list[tuple[int, int]]:
    """(before, after) per dimension; negative paddings are errors, as in TFLite."""
    flat = int_list(paddings)
    if len(flat) != 2 * rank:
        raise ValueError(f"expected paddings of shape ({rank}, 2), found {paddings.shape}")
    widths = list(zip(flat[0::2], flat[1::2]))
    if any(lo < 0 or hi < 0 for lo, hi in widths):
        raise ValueError(f"expected non-negative paddings, found {widths}")
    return widths


def padded_shape(shape: Shape, paddings: np.ndarray) -> Shape:
    """``shape`` grown by ``paddings`` on each side of every dimension."""
    return tuple(d + lo + hi for d, (lo, hi) in zip(shape, pad_widths(paddings, len(shape))))


def pad_output_shape(ctx: ShapeContext) -> Shape | None:
    """The output shape of PAD, PADV2 and MIRROR_PAD (input 0 padded by input 1), or None
    when the paddings are computed at run time."""
    paddings = ctx.constant(1)
    return None if paddings is None else padded_shape(ctx.shape(0), paddings)

"""Shared helpers of the shape and data-movement kernels (RESHAPE, PAD, STRIDED_SLICE, ...).

Shape-like inputs (new shapes, axes, paddings, begin/end) may be computed at run time, so the
kernels read them from ``_run()``'s arguments; these helpers turn them into Python ints.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from offload._graph import Tensor
from offload.ops._base import Shape, check_shape
from offload.quant import scale_zero_point

__all__ = [
    "int_list",
    "scalar_int",
    "check_one_value",
    "not_scalar",
    "normalize_axis",
    "resolve_shape",
    "zero_point",
    "padded",
    "check_index_range",
]


def int_list(values: np.ndarray | Iterable[int]) -> list[int]:
    """A shape-like tensor (any integer dtype, any rank) as a flat list of Python ints."""
    return [int(v) for v in np.asarray(values).reshape(-1)]


def scalar_int(value: np.ndarray | int) -> int:
    """The single element of a scalar or one-element tensor (TFLite reads element 0)."""
    return int(np.asarray(value).reshape(-1)[0])


def check_one_value(shape: tuple[int, ...], what: str) -> None:
    """TFLite's ``NumElements(t) == 1`` on a scalar-like input (an axis, a depth), any rank."""
    count = math.prod(shape)
    check_shape(count == 1, f"expected a single {what} value, found {count} (shape {list(shape)})")


def not_scalar(shape: Shape) -> Shape:
    """``shape``, checked to have an axis: an op along the last axis, or along one it is given,
    has none to work on in a scalar."""
    check_shape(len(shape) >= 1, "expected an input of rank >= 1, found a scalar")
    return shape


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    """A negative axis counts from the end; anything outside [-rank, rank) is an error."""
    if not -rank <= axis < rank:
        raise ValueError(f"expected {what} in [{-rank}, {rank}), found {axis}")
    return axis + rank if axis < 0 else axis


def resolve_shape(shape: Iterable[int], input_shape: tuple[int, ...]) -> tuple[int, ...]:
    """Infer at most one -1 dimension the way TFLite's reshape does: zero dimensions are left
    out of both products, so a -1 beside a 0 dimension still resolves."""
    dims = [int(d) for d in shape]
    num_elements = math.prod(input_shape)
    stretch = [i for i, d in enumerate(dims) if d == -1]
    if len(stretch) > 1:
        raise ValueError(f"expected at most one -1 in the new shape, found {dims}")
    if any(d < -1 for d in dims):
        raise ValueError(f"expected non-negative dimensions in the new shape, found {dims}")
    if stretch:
        if num_elements == 0 and math.prod(d for d in dims if d != -1) != 0:
            dims[stretch[0]] = 0
        else:
            known = math.prod(d for d in dims if d not in (-1, 0))
            dims[stretch[0]] = math.prod(d for d in input_shape if d != 0) // known
    if math.prod(dims) != num_elements:
        raise ValueError(
            f"cannot reshape {tuple(input_shape)} ({num_elements} elements) into "
            f"{tuple(shape)} (resolved {tuple(dims)})"
        )
    return tuple(dims)


def zero_point(tensor: Tensor | None) -> int:
    """The per-tensor zero point, 0 for float or unquantized tensors."""
    return scale_zero_point(tensor)[1]


def padded(
    x: np.ndarray, pads: list[tuple[int, int]], value: object, dtype: np.dtype
) -> np.ndarray:
    """``x`` surrounded by ``pads`` (before, after) per dimension, filled with ``value``.

    One np.full and one slice assignment, in the output dtype: PAD, PADV2 and
    SPACE_TO_BATCH_ND all need exactly this, and it is a little faster than np.pad.
    """
    out_shape = tuple(d + lo + hi for d, (lo, hi) in zip(x.shape, pads))
    out = np.full(out_shape, value, dtype=dtype)
    out[tuple(slice(lo, lo + d) for d, (lo, _) in zip(x.shape, pads))] = x
    return out


def check_index_range(indices: np.ndarray, limit: int, what: str) -> None:
    """TFLite's gathers fail on negative or too-large indices rather than wrapping."""
    if indices.size and (indices.min() < 0 or indices.max() >= limit):
        raise IndexError(
            f"expected {what} in [0, {limit}), found values in "
            f"[{int(indices.min())}, {int(indices.max())}]"
        )

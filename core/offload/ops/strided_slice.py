"""STRIDED_SLICE: numpy-style ``x[begin:end:stride]`` driven by TFLite's five bit masks.

The masks are resolved into one plain (start, stop, stride) or index per "effective" axis:
ellipsis expands to full slices, new_axis inserts a size-1 axis, shrink_axis indexes. Clamping
and the ``offset`` flag (end is relative to begin) follow TFLite's strided_slice_logic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from offload.ops._base import OpKernel, Shape, ShapeContext, check_shape
from offload.ops._registry import register
from offload.ops._shape import int_list
from offload.ops._types import accepts

_FULL = "full"  # an axis taken whole: ellipsis, or past the end of the spec
_NEW = "new"  # a new size-1 axis


def _bit(mask: int, i: int) -> bool:
    return bool(mask >> i & 1)


def _axis_plan(n: int, rank: int, ellipsis: int, new_axis: int) -> list[str | int]:
    """For each effective axis: _FULL, _NEW, or the index into begin/end/strides it reads."""
    added = sum(1 for i in range(n) if _bit(new_axis, i) and not _bit(ellipsis, i))
    eff = rank + added
    plan: list[str | int] = []
    expanded = 0  # extra axes an ellipsis stands for, beyond its own spec entry
    i = 0
    while i < eff:
        if i - expanded < n and _bit(ellipsis, i - expanded):
            # TFLite's ellipsis covers the input axes the rest of the spec does not name.
            end = max(i + 1, min(i + 1 + added + rank - n, eff))
            plan += [_FULL] * (end - i)
            expanded = end - i - 1
            i = end
            continue
        spec = i - expanded
        if spec < n and _bit(new_axis, spec):
            plan.append(_NEW)
        elif spec >= n:
            plan.append(_FULL)
        else:
            plan.append(spec)
        i += 1
    return plan


def _clamp_index(value: int, size: int, stride: int) -> int:
    if value < 0:
        value += size
    return min(max(value, 0), size) if stride > 0 else min(max(value, -1), size - 1)


class _Masks(NamedTuple):
    """The node's bit masks and ``offset`` flag, read once from its options."""

    begin: int
    end: int
    ellipsis: int
    new_axis: int
    shrink: int
    offset: bool

    @classmethod
    def of(cls, options: Any) -> _Masks:
        get = options.get
        return cls(
            int(get("begin_mask", 0)),
            int(get("end_mask", 0)),
            int(get("ellipsis_mask", 0)),
            int(get("new_axis_mask", 0)),
            int(get("shrink_axis_mask", 0)),
            bool(get("offset", False)),
        )


def strided_index(
    shape: Shape, masks: _Masks, begin: np.ndarray, end: np.ndarray, strides: np.ndarray
) -> tuple[list[int], list[slice | int]]:
    """(effective shape, index): the input reshaped to the effective shape (new axes
    inserted) and indexed by ``index`` gives the output."""
    begins, ends, steps = int_list(begin), int_list(end), int_list(strides)
    check_shape(
        len(begins) == len(ends) == len(steps),
        f"expected begin, end and strides of one length, found {begins}, {ends} and {steps}",
    )
    plan = _axis_plan(len(begins), len(shape), masks.ellipsis, masks.new_axis)
    check_shape(
        sum(p != _NEW for p in plan) == len(shape),
        f"expected a slice spec that fits input shape {list(shape)}, found begin {begins}",
    )
    dims = iter(shape)
    eff_shape = [1 if p == _NEW else next(dims) for p in plan]
    index: list[slice | int] = []
    for size, p in zip(eff_shape, plan):
        if p in (_FULL, _NEW):
            index.append(slice(None))
            continue
        assert isinstance(p, int)
        stride = steps[p]
        check_shape(stride != 0, f"expected non-zero strides, found {steps}")
        start = _clamp_index(begins[p], size, stride)
        if _bit(masks.begin, p):
            start = 0 if stride > 0 else size - 1
        if _bit(masks.shrink, p):
            # An out-of-range begin is clamped, as in TFLite. Where TFLite then writes
            # nothing (clamped past the end, or a negative stride) its output is
            # uninitialised memory, so refuse instead.
            check_shape(
                0 <= start < size and stride > 0,
                f"cannot shrink axis {p} at begin {begins[p]} with stride {stride} "
                f"(size {size}): LiteRT leaves this output undefined",
            )
            index.append(start)
            continue
        stop = _clamp_index(ends[p] + (start if masks.offset else 0), size, stride)
        if _bit(masks.end, p):
            stop = size if stride > 0 else -1
        if stride < 0 and start < 0:
            index.append(slice(0, 0))  # nothing to take, and -1 would mean "last"
        else:
            index.append(slice(start, None if stop < 0 else stop, stride))
    return eff_shape, index


def strided_slice_ranges(
    shape: Sequence[int], options: Any, begin: Any, end: Any, strides: Any
) -> list[range | int]:
    """What a STRIDED_SLICE node takes of an input of ``shape``, resolved as LiteRT resolves
    it: the five bit masks and ``offset`` of ``options`` (a node's options, or any mapping)
    applied, ``begin``/``end`` clamped to each axis.

    One entry per axis of the input with its new axes inserted (an ellipsis stands for whole
    axes): the ``range`` of positions read along that axis, in the order they are read (a
    negative step reads backwards; ``range(1)`` for a new axis), or an ``int`` for an axis
    shrunk to that one position. The output shape is the lengths of the ranges, in order.
    Raises ValueError where LiteRT refuses the slice or leaves its output undefined (a zero
    stride, a spec that does not fit the input, shrinking at a clamped begin or with a
    negative stride); :func:`offload.ops.output_shapes` raises it as TensorShapeError.
    """
    eff_shape, index = strided_index(
        tuple(int(d) for d in shape),
        _Masks.of(options),
        np.asarray(begin),
        np.asarray(end),
        np.asarray(strides),
    )
    return [i if isinstance(i, int) else range(size)[i] for size, i in zip(eff_shape, index)]


@register
class StridedSlice(OpKernel):
    op = "STRIDED_SLICE"
    max_version = 8
    types = accepts(
        "FLOAT32 FLOAT16 INT8 UINT8 INT16 INT32 INT64 BOOL FLOAT64 COMPLEX64 UINT16 UINT32"
    )

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None]:
        x = ctx.shape(0)
        for position in (1, 2, 3):  # begin, end and strides: LiteRT's Prepare reads all three
            ctx.shape(position)
        begin, end, strides = (ctx.constant(i) for i in (1, 2, 3))
        if begin is None or end is None or strides is None:
            return [None]
        ranges = strided_slice_ranges(x, ctx.options, begin, end, strides)
        return [tuple(len(r) for r in ranges if isinstance(r, range))]

    def setup(self) -> None:
        self.masks = _Masks.of(self.options)

    def _run(
        self, x: np.ndarray, begin: np.ndarray, end: np.ndarray, strides: np.ndarray
    ) -> np.ndarray:
        eff_shape, index = strided_index(x.shape, self.masks, begin, end, strides)
        # Shrinking every axis yields a numpy scalar; the contract wants arrays.
        return np.asarray(x.reshape(eff_shape)[tuple(index)])

"""STRIDED_SLICE: numpy-style ``x[begin:end:stride]`` driven by TFLite's five bit masks.

The masks are resolved into one plain (start, stop, stride) or index per "effective" axis:
ellipsis expands to full slices, new_axis inserts a size-1 axis, shrink_axis indexes. Clamping
and the ``offset`` flag (end is relative to begin) follow TFLite's strided_slice_logic.
"""

from __future__ import annotations

import numpy as np

from offload.ops._base import OpKernel
from offload.ops._registry import register
from offload.ops._shape import int_list

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


@register
class StridedSlice(OpKernel):
    op = "STRIDED_SLICE"
    max_version = 8

    def setup(self) -> None:
        get = self.options.get
        self.begin_mask = int(get("begin_mask", 0))
        self.end_mask = int(get("end_mask", 0))
        self.ellipsis_mask = int(get("ellipsis_mask", 0))
        self.new_axis_mask = int(get("new_axis_mask", 0))
        self.shrink_mask = int(get("shrink_axis_mask", 0))
        self.offset = bool(get("offset", False))

    def run(
        self, x: np.ndarray, begin: np.ndarray, end: np.ndarray, strides: np.ndarray
    ) -> np.ndarray:
        begins, ends, steps = int_list(begin), int_list(end), int_list(strides)
        plan = _axis_plan(len(begins), x.ndim, self.ellipsis_mask, self.new_axis_mask)
        if sum(p != _NEW for p in plan) != x.ndim:
            raise ValueError(f"the slice spec does not fit input shape {x.shape}")
        shape = iter(x.shape)
        eff_shape = [1 if p == _NEW else next(shape) for p in plan]
        index: list[slice | int] = []
        for size, p in zip(eff_shape, plan):
            if p in (_FULL, _NEW):
                index.append(slice(None))
                continue
            assert isinstance(p, int)
            stride = steps[p]
            if stride == 0:
                raise ValueError(f"stride {p} is 0")
            start = _clamp_index(begins[p], size, stride)
            if _bit(self.begin_mask, p):
                start = 0 if stride > 0 else size - 1
            if _bit(self.shrink_mask, p):
                # An out-of-range begin is clamped, as in TFLite. Where TFLite then writes
                # nothing (clamped past the end, or a negative stride) its output is
                # uninitialised memory, so refuse instead.
                if not 0 <= start < size or stride < 0:
                    raise IndexError(
                        f"cannot shrink axis {p} at begin {begins[p]} with stride {stride} "
                        f"(size {size}): LiteRT leaves this output undefined"
                    )
                index.append(start)
                continue
            stop = _clamp_index(ends[p] + (start if self.offset else 0), size, stride)
            if _bit(self.end_mask, p):
                stop = size if stride > 0 else -1
            if stride < 0 and start < 0:
                index.append(slice(0, 0))  # nothing to take, and -1 would mean "last"
            else:
                index.append(slice(start, None if stop < 0 else stop, stride))
        # Shrinking every axis yields a numpy scalar; the contract wants arrays.
        return np.asarray(x.reshape(eff_shape)[tuple(index)])

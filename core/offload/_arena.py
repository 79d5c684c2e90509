"""The tensor arena: one preallocated block shared by intermediate tensors whose lifetimes do
not overlap, planned once at ``allocate_tensors`` as LiteRT's ArenaPlanner does.

A step's output gets an arena slot when its CPU kernel can write into a given array
(:attr:`offload.ops.OpKernel.writes_into`). Lifetimes run from the step that writes a tensor
to the last step that reads it, or reads anything that may be a view of it: ops such as
RESHAPE return views of their input, so a slot stays reserved until the last of its views
is dead. A tensor any of whose views the caller can see after ``invoke`` (a graph output)
gets no slot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["ArenaPlan", "StepTensors", "plan_arena", "place"]

_ALIGNMENT = 64


@dataclass(frozen=True)
class StepTensors:
    """What the planner needs of one step: its tensor indices, and whether it writes its
    output into a given array (then it never returns a view of an input, and its output
    may get a slot when ``nbytes`` lists it)."""

    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    writes_into: bool


@dataclass(frozen=True)
class ArenaPlan:
    """Byte offsets of the tensors given arena slots, and the arena's total size."""

    offsets: dict[int, int]
    size: int

    def views(self, shapes: Mapping[int, tuple[int, ...]], dtypes: Mapping[int, np.dtype]):
        """Allocate the arena and return (the block, one array view per placed tensor)."""
        block = np.empty(max(self.size, 1), np.uint8)
        arrays = {}
        for t, offset in self.offsets.items():
            dtype = np.dtype(dtypes[t])
            count = int(np.prod(shapes[t], dtype=np.int64))
            flat = block[offset : offset + count * dtype.itemsize].view(dtype)
            arrays[t] = flat.reshape(shapes[t])
        return block, arrays


def plan_arena(
    steps: Sequence[StepTensors],
    nbytes: Mapping[int, int],
    keep: set[int],
) -> ArenaPlan:
    """Give each eligible output a slot; ``nbytes`` holds the size of every eligible tensor
    (tensors missing from it are not placed), ``keep`` the tensors that must outlive invoke.
    """
    last_use: dict[int, int] = {}
    for pos, step in enumerate(steps):
        for t in (*step.inputs, *step.outputs):
            if t >= 0:
                last_use[t] = pos
    # The arena tensors each tensor may share memory with: itself if it is placed, and
    # whatever its inputs share when a step may return a view.
    roots: dict[int, frozenset[int]] = {}
    first_def: dict[int, int] = {}
    for pos, step in enumerate(steps):
        if step.writes_into:
            # Its outputs are fresh or its own slot, whether or not it gets one.
            for t in step.outputs:
                if t >= 0 and t in nbytes and t not in keep and len(step.outputs) == 1:
                    first_def.setdefault(t, pos)
                    roots[t] = frozenset((t,))
            continue
        shared = frozenset().union(*(roots.get(i, frozenset()) for i in step.inputs if i >= 0))
        for t in step.outputs:
            if t >= 0:
                roots[t] = roots.get(t, frozenset()) | shared
    end = {t: last_use.get(t, first_def[t]) for t in first_def}
    excluded: set[int] = set()
    for t, shared in roots.items():
        for root in shared:
            if root == t:
                continue
            if t in keep:
                excluded.add(root)
            else:
                end[root] = max(end[root], last_use.get(t, end[root]))
    lifetimes = {t: (first_def[t], end[t]) for t in first_def if t not in excluded}
    return place(lifetimes, nbytes)


def place(lifetimes: Mapping[int, tuple[int, int]], nbytes: Mapping[int, int]) -> ArenaPlan:
    """Greedy placement, largest first: each tensor goes to the lowest aligned offset that
    overlaps no placed tensor whose lifetime (inclusive step range) overlaps its own."""
    offsets: dict[int, int] = {}
    size = 0
    for t in sorted(lifetimes, key=lambda t: (-nbytes[t], lifetimes[t][0], t)):
        start, stop = lifetimes[t]
        need = nbytes[t]
        busy = sorted(
            (offsets[o], offsets[o] + nbytes[o])
            for o in offsets
            if lifetimes[o][0] <= stop and start <= lifetimes[o][1]
        )
        candidate = 0
        for lo, hi in busy:
            if candidate + need <= lo:
                break
            candidate = max(candidate, -(-hi // _ALIGNMENT) * _ALIGNMENT)
        offsets[t] = candidate
        size = max(size, candidate + need)
    return ArenaPlan(offsets, size)

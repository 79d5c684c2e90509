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

import bisect
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
        # One constructor call per tensor (the view's base is the block): slicing, viewing
        # and reshaping cost several times more, which shows at tens of thousands of slots.
        arrays = {
            t: np.ndarray(shapes[t], dtype=dtypes[t], buffer=block, offset=offset)
            for t, offset in self.offsets.items()
        }
        return block, arrays


def plan_arena(
    steps: Sequence[StepTensors],
    nbytes: Mapping[int, int],
    keep: set[int],
) -> ArenaPlan:
    """Give each eligible output a slot; ``nbytes`` holds the size of every eligible tensor
    (tensors missing from it are not placed), ``keep`` the tensors that must outlive invoke.

    ``steps`` are in execution order with each tensor written by at most one step, as
    :func:`offload._plan.make_plan` guarantees.
    """
    last_use: dict[int, int] = {}
    first_def: dict[int, int] = {}
    for pos, step in enumerate(steps):
        for t in (*step.inputs, *step.outputs):
            if t >= 0:
                last_use[t] = pos
        if step.writes_into and len(step.outputs) == 1:
            # Its output is fresh or its own slot, whether or not it gets one.
            t = step.outputs[0]
            if t >= 0 and t in nbytes and t not in keep:
                first_def.setdefault(t, pos)
    # A step that may return a view makes each of its outputs share memory with each of its
    # inputs. Walking the steps backwards, each tensor learns the last step that reads
    # anything that may share its memory, and whether any of those is kept. That is one
    # pass; carrying the set of shared slots forward instead grows along a chain of
    # view-returning steps and turns quadratic.
    view_end: dict[int, int] = {}
    view_kept: set[int] = set()
    for step in reversed(steps):
        if step.writes_into:
            continue
        outputs = [t for t in step.outputs if t >= 0]
        if not outputs:
            continue
        end = max(max(last_use[t], view_end.get(t, -1)) for t in outputs)
        kept = any(t in keep or t in view_kept for t in outputs)
        for i in step.inputs:
            if i >= 0:
                if end > view_end.get(i, -1):
                    view_end[i] = end
                if kept:
                    view_kept.add(i)
    lifetimes = {
        t: (start, max(last_use[t], view_end.get(t, -1)))
        for t, start in first_def.items()
        if t not in view_kept
    }
    return place(lifetimes, nbytes)


def place(lifetimes: Mapping[int, tuple[int, int]], nbytes: Mapping[int, int]) -> ArenaPlan:
    """Greedy placement, largest first: each tensor goes to the lowest aligned offset that
    overlaps no placed tensor whose lifetime (inclusive step range) overlaps its own.

    LiteRT's ArenaPlanner scans every allocation for each tensor; here the placed tensors
    are indexed by lifetime, so each tensor visits only those alive with it: O(n log n)
    plus the overlapping pairs, instead of O(n^2) on a long chain.
    """
    order = sorted(lifetimes, key=lambda t: (-nbytes[t], lifetimes[t][0], t))
    if not order:
        return ArenaPlan({}, 0)
    # Lifetimes that overlap [start, stop] either contain ``start`` or begin in
    # (start, stop]. Every query point is some tensor's start, so the time axis is the
    # sorted distinct starts: a segment tree over it answers "which placed lifetimes contain
    # this start" (each lifetime stored at O(log n) nodes), and a bucket per start holds the
    # placed lifetimes that begin there.
    points = sorted({start for start, _ in lifetimes.values()})
    rank = {p: k for k, p in enumerate(points)}
    leaves = 1 << max(len(points) - 1, 0).bit_length()
    covering: list[list[int]] = [[] for _ in range(2 * leaves)]  # tree node -> placed tensors
    starting: list[list[int]] = [[] for _ in points]  # start rank -> placed tensors
    offsets: dict[int, int] = {}
    size = 0
    for t in order:
        start, stop = lifetimes[t]
        need = nbytes[t]
        first = rank[start]
        last = bisect.bisect_right(points, stop) - 1  # the last start within [start, stop]
        alive: list[int] = []
        node = first + leaves
        while node:
            alive += covering[node]
            node >>= 1
        for k in range(first + 1, last + 1):
            alive += starting[k]
        busy = sorted((offsets[o], offsets[o] + nbytes[o]) for o in alive)
        candidate = 0
        for lo, hi in busy:
            if candidate + need <= lo:
                break
            candidate = max(candidate, -(-hi // _ALIGNMENT) * _ALIGNMENT)
        offsets[t] = candidate
        size = max(size, candidate + need)
        starting[first].append(t)
        lo_node, hi_node = first + leaves, last + leaves + 1
        while lo_node < hi_node:
            if lo_node & 1:
                covering[lo_node].append(t)
                lo_node += 1
            if hi_node & 1:
                hi_node -= 1
                covering[hi_node].append(t)
            lo_node >>= 1
            hi_node >>= 1
    return ArenaPlan(offsets, size)

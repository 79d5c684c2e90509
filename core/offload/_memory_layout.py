"""Where each tensor's memory is between ``allocate_tensors`` and ``invoke``.

Inputs, variables and constants have buffers of their own, allocated (or kept, where they
fit already) at ``allocate_tensors``. Intermediates are released after the last step that
reads them, unless ``preserve_all_tensors`` keeps them for inspection; and an intermediate
written by a CPU kernel that can write into a given array gets a slot in the arena, one
block shared by tensors whose lifetimes do not overlap (planned by :mod:`offload._arena`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

import numpy as np

from offload._arena import StepTensors, plan_arena
from offload._graph import Subgraph
from offload._steps import CompiledStep
from offload._tensor_details import variable_initial_value
from offload.ops._base import Shape

__all__ = ["allocate_buffers", "assign_liveness", "attach_arena"]


def allocate_buffers(
    subgraph: Subgraph, shapes: Sequence[Shape], buffers: list[np.ndarray | None]
) -> None:
    """Fill ``buffers`` for variables (kept while their shape holds), constants and inputs
    (kept while their shape and dtype hold)."""
    for t in subgraph.tensors:
        if t.is_variable:
            held = buffers[t.index]
            if held is None or held.shape != shapes[t.index]:
                buffers[t.index] = variable_initial_value(t, shapes[t.index])
        elif t.is_constant:
            if t.sparsity is None and (t.dtype != np.dtype(object) or t.type_name == "STRING"):
                buffers[t.index] = t.constant_value()
    for i in subgraph.inputs:
        t = subgraph.tensors[i]
        shape = shapes[i]
        buf = buffers[i]
        if buf is None or buf.shape != shape or buf.dtype != t.dtype:
            buffers[i] = np.zeros(shape, dtype=t.dtype)


def assign_liveness(
    compiled: Sequence[CompiledStep],
    subgraph: Subgraph,
    folded: Collection[int],
    preserve_all_tensors: bool,
) -> set[int]:
    """Release each intermediate after its last use; returns the tensors always kept."""
    keep = set(subgraph.inputs) | set(subgraph.outputs)
    keep |= {t.index for t in subgraph.tensors if t.is_constant or t.is_variable}
    keep |= set(folded)
    if preserve_all_tensors:
        return keep
    last_use: dict[int, int] = {}
    for pos, cs in enumerate(compiled):
        for t in (*cs.inputs, *cs.outputs):
            if t >= 0 and t not in keep:
                last_use[t] = pos
    releases: dict[int, list[int]] = {}
    for t, pos in last_use.items():
        releases.setdefault(pos, []).append(t)
    for pos, cs in enumerate(compiled):
        cs.release = tuple(releases.get(pos, ()))
    return keep


def attach_arena(
    compiled: Sequence[CompiledStep],
    subgraph: Subgraph,
    shapes: Sequence[Shape],
    value_shaped: Collection[int],
    keep: set[int],
    preserve_all_tensors: bool,
) -> np.ndarray | None:
    """Give kernels that can write into a preallocated array their output's arena slot, and
    return the arena (None where nothing gets one).

    Planned from the model's static shapes, so only while every input still has its
    model shape: after a resize the intermediate shapes are known only at invoke, and
    kernels allocate their outputs (LiteRT re-plans its arena the same way on resize).
    ``value_shaped`` nodes' outputs are sized by the run, so they get no slot.
    """
    sg = subgraph
    if preserve_all_tensors or any(shapes[i] != sg.tensors[i].shape for i in sg.inputs):
        return None
    nbytes: dict[int, int] = {}
    for cs in compiled:
        if cs.kernel is None or not cs.kernel.writes_into or not cs.single:
            continue
        if cs.step.index in value_shaped:
            continue
        t = sg.tensors[cs.outputs[0]]
        shape = shapes[t.index]
        if t.dtype.kind in "biuf" and all(d > 0 for d in shape):
            nbytes[t.index] = math.prod(shape) * t.dtype.itemsize
    steps = [
        StepTensors(cs.inputs, cs.outputs, cs.kernel is not None and cs.kernel.writes_into)
        for cs in compiled
    ]
    plan = plan_arena(steps, nbytes, keep)
    if not plan.offsets:
        return None
    arena, views = plan.views(
        {t: shapes[t] for t in plan.offsets},
        {t: sg.tensors[t].dtype for t in plan.offsets},
    )
    for cs in compiled:
        view = views.get(cs.outputs[0]) if cs.kernel is not None and cs.single else None
        if view is not None:
            # Held by the kernel rather than bound into cs.run with functools.partial:
            # OpKernel.run then passes it on without building keyword arguments twice.
            cs.kernel.expect_outputs([view.shape], out=view)
    return arena

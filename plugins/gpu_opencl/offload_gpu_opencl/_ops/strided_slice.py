"""STRIDED_SLICE (rank <= 4) as gather4: y[i] = x[base + sum(i_d * step_d)]."""

from __future__ import annotations

from offload import Node, Subgraph
from offload.geometry import strided_slice_ranges
from offload_gpu_opencl._ir import Lowering, elements
from offload_gpu_opencl._ops._spec import OpSpec
from offload_gpu_opencl._shapes import constant_ints, need, required

__all__ = ["SPECS"]


def limits(node: Node, subgraph: Subgraph) -> None:
    """What gather4 cannot do: ellipsis and new-axis masks, offset, rank above 4; begin, end
    and strides are read on the host, so constant. The slice itself is the core's rule."""
    o = node.options
    need(
        not (o.get("ellipsis_mask", 0) or o.get("new_axis_mask", 0) or o.get("offset", False)),
        "ellipsis_mask, new_axis_mask and offset are not supported",
    )
    for pos, name in ((1, "begin"), (2, "end"), (3, "strides")):
        constant_ints(subgraph, required(node, subgraph, pos, name), f"{name} (input {pos})")
    rank = len(required(node, subgraph, 0, "input").shape)
    need(rank <= 4, f"input must have rank <= 4, found {rank}")


def _slice_plan(node: Node, subgraph: Subgraph) -> tuple[int, list[int], list[int]]:
    """STRIDED_SLICE as (flat base index, extent per input dim, flat step per input dim), from
    the positions the core's rule reads along each axis (:func:`strided_slice_ranges`)."""
    shape = tuple(int(d) for d in subgraph.tensors[node.inputs[0]].shape)
    begin, end, strides = (subgraph.tensors[node.inputs[pos]].constant_value() for pos in (1, 2, 3))
    ranges = strided_slice_ranges(shape, node.options, begin, end, strides)
    base, extents, steps = 0, [], []
    for d, taken in enumerate(ranges):
        stride_in = elements(shape[d + 1 :])
        if isinstance(taken, int):  # a shrunk axis
            taken = range(taken, taken + 1)
        base += (taken.start if len(taken) else 0) * stride_in
        extents.append(len(taken))
        steps.append(taken.step * stride_in)
    return base, extents, steps


def lower(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    base, extents, steps = _slice_plan(node, lw.subgraph)
    extents = [1] * (4 - len(extents)) + extents
    steps = [0] * (4 - len(steps)) + steps
    total = elements(tuple(extents))
    lw.launch(
        node,
        "gather4",
        (total,),
        lw.ref(x),
        lw.out(node),
        total,
        extents[1],
        extents[2],
        extents[3],
        base,
        *steps,
    )
    # The output holds input values: on the grid already, no fake quantization.


SPECS = (
    OpSpec(
        op="STRIDED_SLICE",
        limits=limits,
        lower=lower,
        quantized_versions=(1, 2),
        constant_inputs=(1, 2, 3),
        constraints=("begin/end/strides constant; no ellipsis or new-axis masks; no offset",),
    ),
)

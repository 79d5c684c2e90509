"""STRIDED_SLICE (rank <= 4) as gather4: y[i] = x[base + sum(i_d * step_d)]."""

from __future__ import annotations

from offload import Node, Subgraph
from offload_gpu_opencl._ir import Lowering, Shape, elements
from offload_gpu_opencl._ops._spec import OpSpec
from offload_gpu_opencl._shapes import constant_ints, need, required

__all__ = ["SPECS"]


def _slice_plan(node: Node, subgraph: Subgraph) -> tuple[int, list[int], list[int], Shape]:
    """STRIDED_SLICE as (flat base index, extent per input dim, flat step per input dim, output
    shape), clamped as TFLite clamps (the CPU reference's rules). Refuses what gather4 cannot
    do (ellipsis and new-axis masks, offset) and what the CPU reference refuses (a zero stride,
    shrinking an axis at a begin clamped out of it, or with a negative stride)."""
    o = node.options
    need(
        not (o.get("ellipsis_mask", 0) or o.get("new_axis_mask", 0) or o.get("offset", False)),
        "ellipsis_mask, new_axis_mask and offset are not supported",
    )
    shape = tuple(int(d) for d in required(node, subgraph, 0, "input").shape)
    begin, end, strides = (
        constant_ints(subgraph, required(node, subgraph, pos, name), f"{name} (input {pos})")
        for pos, name in ((1, "begin"), (2, "end"), (3, "strides"))
    )
    n = len(begin)
    need(
        len(end) == n and len(strides) == n,
        f"begin, end and strides must be as long, found {n}, {len(end)} and {len(strides)}",
    )
    need(len(shape) <= 4, f"input must have rank <= 4, found {len(shape)}")
    need(n <= len(shape), f"{n} slice entries for an input of rank {len(shape)}")
    begin_mask, end_mask = int(o.get("begin_mask", 0)), int(o.get("end_mask", 0))
    shrink_mask = int(o.get("shrink_axis_mask", 0))
    base, extents, steps, out = 0, [], [], []
    stride_in = [elements(shape[d + 1 :]) for d in range(len(shape))]
    for d, dim in enumerate(shape):
        if d >= n:  # past the spec: the whole axis, as the CPU reference takes it
            extents.append(dim)
            steps.append(stride_in[d])
            out.append(dim)
            continue
        s = strides[d]
        need(s != 0, "strides must be non-zero")
        lo, hi = (0, dim) if s > 0 else (-1, dim - 1)
        if begin_mask >> d & 1:
            start = 0 if s > 0 else dim - 1
        else:
            start = min(max(begin[d] + (dim if begin[d] < 0 else 0), lo), hi)
        if shrink_mask >> d & 1:
            need(
                0 <= start < dim and s > 0,
                f"cannot shrink axis {d} at begin {begin[d]} with stride {s} (size {dim}): "
                "LiteRT leaves this output undefined",
            )
            extent, s = 1, 1
        else:
            if end_mask >> d & 1:
                stop = dim if s > 0 else -1
            else:
                stop = min(max(end[d] + (dim if end[d] < 0 else 0), lo), hi)
            span = stop - start if s > 0 else start - stop
            extent = max(0, -(-span // abs(s)))
            out.append(extent)
        if extent:
            last = start + (extent - 1) * s
            # Clamping keeps both ends inside the axis; this is what gather4 relies on.
            need(
                0 <= start < dim and 0 <= last < dim,
                f"axis {d}: elements {start} to {last} fall outside its {dim} entries",
            )
        base += start * stride_in[d]
        extents.append(extent)
        steps.append(s * stride_in[d])
    return base, extents, steps, tuple(out)


def shapes(node: Node, sg: Subgraph) -> list[Shape]:
    return [_slice_plan(node, sg)[3]]


def lower(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    base, extents, steps, _ = _slice_plan(node, lw.subgraph)
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
        shapes=shapes,
        lower=lower,
        quantized_versions=(1, 2),
        constant_inputs=(1, 2, 3),
        constraints=("begin/end/strides constant; no ellipsis or new-axis masks; no offset",),
    ),
)

"""What a plan costs besides its kernels: partitions to enter and leave, bytes copied across.

One owner for two uses of the same figures: ``delegates="auto"`` rejects a candidate plan
that is fragmented before spending time measuring it, and an explicit delegate list whose
plan is fragmented gets one :class:`~offload.errors.PartitionCostWarning`.

A plan is *fragmented* when

- it has more than :data:`MAX_PARTITIONS` delegate partitions (each is a boundary copy in,
  a copy out and a hand-over; Core ML's "87 partitions" plan ran 6-8x slower than the CPU), or
- its boundary copies dominate: at least :data:`MIN_COPY_BYTES` copied per invoke, and more
  bytes copied than multiply-adds the delegates do (copying a byte costs about what a
  multiply-add does on a CPU; a partition of elementwise ops moves 12 bytes per addition).

The work is an estimate from declared shapes: multiply-adds for the ops that are products
(convolutions, fully connected, batch matmul), one per output element for everything else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from offload._partition import node_ranges

if TYPE_CHECKING:
    from offload._graph import Node, Subgraph
    from offload._plan import Plan

__all__ = [
    "MAX_PARTITIONS",
    "MIN_COPY_BYTES",
    "PlanFigures",
    "fragmentation",
    "node_work",
    "plan_figures",
    "splitting_ops",
]

MAX_PARTITIONS = 8
MIN_COPY_BYTES = 64 << 10


def _count(shape: Sequence[int]) -> int:
    # A dynamic dimension (-1 in a signature, 0 in a placeholder) counts as 1: an estimate.
    return math.prod(max(int(d), 1) for d in shape)


def node_work(node: Node, subgraph: Subgraph) -> int:
    """Multiply-adds of a product op, else output elements: the node's work, estimated."""
    tensors = subgraph.tensors
    outs = [tensors[t] for t in node.outputs if t >= 0]
    out_elems = sum(_count(t.shape) for t in outs)
    ins = [tensors[t] if 0 <= t < len(tensors) else None for t in node.inputs]

    def dims(pos: int) -> tuple[int, ...]:
        t = ins[pos] if pos < len(ins) else None
        return tuple(max(int(d), 1) for d in t.shape) if t is not None else ()

    op = node.op
    if op == "CONV_2D" and len(dims(1)) == 4:
        return out_elems * _count(dims(1)[1:])  # [cout, kh, kw, cin]: kh*kw*cin per output
    if op == "DEPTHWISE_CONV_2D" and len(dims(1)) == 4:
        return out_elems * dims(1)[1] * dims(1)[2]
    if op == "FULLY_CONNECTED" and len(dims(1)) == 2:
        return out_elems * dims(1)[1]
    if op == "TRANSPOSE_CONV" and len(dims(1)) == 4:
        return _count(dims(2)) * dims(1)[0] * dims(1)[1] * dims(1)[2]
    if op == "BATCH_MATMUL" and dims(0):
        return out_elems * dims(0)[-1]
    if op == "CONV_3D" and len(dims(1)) == 5:
        return out_elems * _count(dims(1)[:4])  # [kd, kh, kw, cin, cout]
    return out_elems


@dataclass(frozen=True)
class PlanFigures:
    partitions: int
    delegated_nodes: int
    cpu_nodes: int
    bytes_copied: int  # boundary inputs and outputs of every partition, per invoke
    delegated_work: int  # estimated multiply-adds (or elements) the partitions compute


def _nbytes(subgraph: Subgraph, t: int) -> int:
    tensor = subgraph.tensors[t]
    return _count(tensor.shape) * tensor.dtype.itemsize


def plan_figures(plan: Plan) -> PlanFigures:
    sg = plan.subgraph
    copied = sum(_nbytes(sg, t) for p in plan.partitions for t in (*p.inputs, *p.outputs))
    work = sum(node_work(sg.nodes[n], sg) for p in plan.partitions for n in p.nodes)
    return PlanFigures(
        partitions=len(plan.partitions),
        delegated_nodes=sum(len(p.nodes) for p in plan.partitions),
        cpu_nodes=len(plan.fallback_nodes()),
        bytes_copied=copied,
        delegated_work=work,
    )


def fragmentation(plan: Plan) -> str | None:
    """Why ``plan`` is fragmented (see the module's rule), or None."""
    f = plan_figures(plan)
    nodes = f.delegated_nodes + f.cpu_nodes
    if f.partitions > MAX_PARTITIONS:
        return (
            f"{f.partitions} partitions for {nodes} nodes (more than {MAX_PARTITIONS}; "
            f"{f.delegated_nodes} delegated, {f.cpu_nodes} on the CPU)"
        )
    if f.bytes_copied >= MIN_COPY_BYTES and f.bytes_copied > f.delegated_work:
        return (
            f"its boundary copies dominate: {f.bytes_copied:,} bytes copied per invoke for "
            f"about {f.delegated_work:,} multiply-adds in {f.partitions} partition(s)"
        )
    return None


def splitting_ops(plan: Plan, limit: int = 4) -> str:
    """The ops left on the CPU between partitions, most frequent first, with a reason each."""
    summary = plan.fallback_summary()
    ranked = sorted(summary.items(), key=lambda kv: -kv[1]["count"])[:limit]
    parts = []
    for op, entry in ranked:
        reasons = [
            f"{delegate}: {reason}"
            for delegate, by in entry["reasons"].items()
            for reason in list(by)[:1]
        ]
        nodes = [n for n in plan.fallback_nodes() if _op_of(plan, n) == op]
        shown = node_ranges(nodes[:8]) + (", ..." if len(nodes) > 8 else "")
        why = f" ({reasons[0]})" if reasons else ""
        parts.append(f"{op} x{entry['count']} [nodes {shown}]{why}")
    more = len(summary) - len(ranked)
    if more > 0:
        parts.append(f"{more} more op(s)")
    return "; ".join(parts) or "none (the delegates leave no node on the CPU)"


def _op_of(plan: Plan, n: int) -> str:
    node = plan.subgraph.nodes[n]
    return node.op_name

"""Graph partitioning the way LiteRT does it, extended to several delegates in priority order.

LiteRT groups supported nodes with ``PartitionGraphIntoIndependentNodeSubsets``: it walks the
graph in waves, each wave taking every ready node of one kind (supported or not) before
switching kind. A partition built that way never depends on itself through an unsupported
node, so contracting it to one step keeps the graph acyclic. Here the walk runs over *units*
(single CPU nodes, or partitions an earlier delegate already took), so each delegate in turn
sees the earlier ones' partitions as opaque steps.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from offload._graph import Subgraph
from offload.errors import InvalidGraphError

__all__ = [
    "Partition",
    "Unit",
    "check_execution_order",
    "group_units",
    "initial_units",
    "finish_partition",
    "node_ranges",
    "order_units",
]


@dataclass(frozen=True)
class Partition:
    """Nodes one delegate runs as one step, and the tensors that cross its boundary."""

    index: int
    delegate: str
    nodes: tuple[int, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    constants: tuple[int, ...] = ()


@dataclass
class Unit:
    """A schedulable step: one CPU node (owner None) or one delegate partition."""

    nodes: list[int]
    owner: str | None = None


def check_execution_order(subgraph: Subgraph) -> None:
    """Reject a graph whose operators are not in execution order, as the .tflite format
    requires: every tensor a node reads is written by an earlier node (or by none: inputs,
    constants, variables), and no tensor is written twice.

    LiteRT runs operators in file order without checking: a node reading a tensor that a
    later node writes reads whatever the arena slot holds (zeros, or the previous invoke's
    value), and a node reading its own output is refused at AllocateTensors. Running such
    a graph in dataflow order would silently compute something else, and a true cycle has
    no order at all, so both are refused here, before partitioning relies on the order.
    """
    nodes = subgraph.nodes
    writer: dict[int, int] = {}  # tensor -> the first node that writes it
    problems: list[tuple[int, str]] = []  # (node index, what is wrong there)
    for node in nodes:
        for t in node.outputs:
            if t < 0:
                continue
            if t in writer:
                problems.append(
                    (
                        node.index,
                        f"tensor {_tensor_name(subgraph, t)} is written by "
                        f"{nodes[writer[t]].describe()} and again by {node.describe()}",
                    )
                )
            else:
                writer[t] = node.index
    for node in nodes:
        for t in node.inputs:
            w = writer.get(t)
            if w is not None and w >= node.index:
                where = "itself"
                if w != node.index:
                    where = f"{nodes[w].describe()}, which comes after it"
                problems.append(
                    (
                        node.index,
                        f"{node.describe()} reads tensor {_tensor_name(subgraph, t)}, "
                        f"which is written only by {where}",
                    )
                )
    if problems:
        problems.sort(key=lambda p: p[0])
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InvalidGraphError(
            f"subgraph {subgraph.index} ({subgraph.name!r}): expected operators in execution "
            "order (each tensor written by one node, before any node reads it), found: "
            f"{problems[0][1]}{more}; the model file is malformed (re-export it with the "
            "converter)"
        )


def _tensor_name(subgraph: Subgraph, t: int) -> str:
    return f"{t} ({subgraph.tensors[t].name!r})"


def initial_units(subgraph: Subgraph, folded: Collection[int] = ()) -> list[Unit]:
    """One CPU unit per node, except the nodes the core folded into constants."""
    skip = set(folded)
    return [Unit(nodes=[node.index]) for node in subgraph.nodes if node.index not in skip]


def _unit_graph(subgraph: Subgraph, units: Sequence[Unit]) -> tuple[list[int], list[list[int]]]:
    """Per unit: how many other units it reads from, and which units read from it.

    A node in no unit was folded: its outputs are constants, so reading them waits on nothing.
    """
    node_unit = [-1] * len(subgraph.nodes)
    for u, unit in enumerate(units):
        for n in unit.nodes:
            node_unit[n] = u
    producer = subgraph.producers()
    nodes = subgraph.nodes
    waiting = [0] * len(units)
    dependents: list[list[int]] = [[] for _ in units]
    # seen[d] == u once the edge d -> u is recorded: no set per unit, which at tens of
    # thousands of units costs more than the walk itself.
    seen = [-1] * len(units)
    for u, unit in enumerate(units):
        for n in unit.nodes:
            for t in nodes[n].inputs:
                p = producer.get(t)
                if p is None:
                    continue
                d = node_unit[p]
                if d >= 0 and d != u and seen[d] != u:
                    seen[d] = u
                    waiting[u] += 1
                    dependents[d].append(u)
    return waiting, dependents


def group_units(
    subgraph: Subgraph, units: Sequence[Unit], supported: Callable[[Unit], bool]
) -> list[list[int]]:
    """Split units into waves of one kind; return the waves of supported units (unit indices).

    Each wave takes the ready units of its kind lowest index first. Ready units wait in one
    heap per kind, so a wave neither re-sorts nor rescans the other kind's ready units: the
    walk is O(E + n log n) however many waves the graph alternates through.
    """
    waiting, dependents = _unit_graph(subgraph, units)
    kind = [bool(supported(unit)) for unit in units]
    ready: dict[bool, list[int]] = {True: [], False: []}
    for u in range(len(units)):  # ascending, so each list is already a heap
        if waiting[u] == 0:
            ready[kind[u]].append(u)
    done = 0
    groups: list[list[int]] = []
    firsts = [r[0] for r in ready.values() if r]
    current = kind[min(firsts)] if firsts else False
    empty_waves = 0
    while done < len(units):
        wave: list[int] = []
        pending, ready[current] = ready[current], []
        other = ready[not current]
        while pending:
            u = heapq.heappop(pending)
            wave.append(u)
            done += 1
            for v in dependents[u]:
                waiting[v] -= 1
                if waiting[v] == 0:
                    heapq.heappush(pending if kind[v] == current else other, v)
        if wave and current:
            groups.append(sorted(wave))
        empty_waves = 0 if wave else empty_waves + 1
        if empty_waves > 2:
            # check_execution_order rejects cyclic graphs, and merging units along waves
            # keeps the unit graph acyclic, so this is a bug here, not in the model.
            raise AssertionError("the graph has a cycle; no node is ready to run")
        current = not current
    return groups


def order_units(subgraph: Subgraph, units: Sequence[Unit]) -> list[int]:
    """A deterministic execution order of units (Kahn's algorithm, lowest first node first).

    Ready units wait in a heap keyed by their first node, O(E + n log n) in all.
    """
    waiting, dependents = _unit_graph(subgraph, units)
    first = [min(unit.nodes) for unit in units]  # distinct: units share no node
    ready = [(first[u], u) for u in range(len(units)) if waiting[u] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _, u = heapq.heappop(ready)
        order.append(u)
        for v in dependents[u]:
            waiting[v] -= 1
            if waiting[v] == 0:
                heapq.heappush(ready, (first[v], v))
    if len(order) != len(units):
        raise AssertionError("partitioning produced a cycle; this is a bug in offload")
    return order


def finish_partition(
    subgraph: Subgraph,
    index: int,
    delegate: str,
    nodes: Sequence[int],
    consumers: Mapping[int, Sequence[int]] | None = None,
) -> Partition:
    """Compute a partition's boundary: runtime inputs, constants used, outputs read outside.

    ``consumers`` is ``subgraph.consumers()``; a caller finishing many partitions passes it
    once, so each partition costs its own size rather than a scan of the whole graph.
    """
    if consumers is None:
        consumers = subgraph.consumers()
    members = set(nodes)
    produced = {t for n in nodes for t in subgraph.nodes[n].outputs}
    tensors = subgraph.tensors
    inputs: list[int] = []
    constants: list[int] = []
    seen: set[int] = set()
    for n in nodes:
        for t in subgraph.nodes[n].inputs:
            if t < 0 or t in produced or t in seen:
                continue
            seen.add(t)
            target = constants if tensors[t].is_constant and not tensors[t].is_variable else inputs
            target.append(t)
    graph_outputs = set(subgraph.outputs)
    outputs = [
        t
        for n in nodes
        for t in subgraph.nodes[n].outputs
        if t in graph_outputs or any(c not in members for c in consumers.get(t, ()))
    ]
    return Partition(
        index=index,
        delegate=delegate,
        nodes=tuple(sorted(nodes)),
        inputs=tuple(inputs),
        outputs=tuple(dict.fromkeys(outputs)),
        constants=tuple(constants),
    )


def node_ranges(nodes: Sequence[int]) -> str:
    """``3-7, 9``: a partition's nodes, compactly."""
    ordered = sorted(nodes)
    spans: list[str] = []
    start = prev = ordered[0]
    for n in [*ordered[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        spans.append(f"{start}-{prev}" if prev != start else f"{start}")
        if n is not None:
            start = prev = n
    return ", ".join(spans)

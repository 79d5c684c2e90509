"""Graph partitioning the way LiteRT does it, extended to several delegates in priority order.

LiteRT groups supported nodes with ``PartitionGraphIntoIndependentNodeSubsets``: it walks the
graph in waves, each wave taking every ready node of one kind (supported or not) before
switching kind. A partition built that way never depends on itself through an unsupported
node, so contracting it to one step keeps the graph acyclic. Here the walk runs over *units*
(single CPU nodes, or partitions an earlier delegate already took), so each delegate in turn
sees the earlier ones' partitions as opaque steps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from offload._graph import Subgraph

__all__ = ["Partition", "Unit", "group_units", "initial_units", "finish_partition", "order_units"]


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
    deps: set[int] = field(default_factory=set)


def initial_units(subgraph: Subgraph) -> list[Unit]:
    return [Unit(nodes=[node.index]) for node in subgraph.nodes]


def _unit_deps(subgraph: Subgraph, units: Sequence[Unit]) -> list[set[int]]:
    node_unit = {n: u for u, unit in enumerate(units) for n in unit.nodes}
    producer = subgraph.producers()
    deps: list[set[int]] = []
    for u, unit in enumerate(units):
        found: set[int] = set()
        for n in unit.nodes:
            for t in subgraph.nodes[n].inputs:
                p = producer.get(t)
                if p is not None and node_unit[p] != u:
                    found.add(node_unit[p])
        deps.append(found)
    return deps


def group_units(
    subgraph: Subgraph, units: Sequence[Unit], supported: Callable[[Unit], bool]
) -> list[list[int]]:
    """Split units into waves of one kind; return the waves of supported units (unit indices)."""
    deps = _unit_deps(subgraph, units)
    dependents: list[list[int]] = [[] for _ in units]
    for u, ds in enumerate(deps):
        for d in ds:
            dependents[d].append(u)
    waiting = [len(ds) for ds in deps]
    kind = [supported(unit) for unit in units]
    ready = sorted(u for u in range(len(units)) if waiting[u] == 0)
    done = 0
    groups: list[list[int]] = []
    current = kind[ready[0]] if ready else False
    empty_waves = 0
    while done < len(units):
        wave: list[int] = []
        pending = [u for u in ready if kind[u] == current]
        ready = [u for u in ready if kind[u] != current]
        while pending:
            pending.sort()
            u = pending.pop(0)
            wave.append(u)
            done += 1
            for v in dependents[u]:
                waiting[v] -= 1
                if waiting[v] == 0:
                    (pending if kind[v] == current else ready).append(v)
        if wave and current:
            groups.append(sorted(wave))
        empty_waves = 0 if wave else empty_waves + 1
        if empty_waves > 2:
            raise AssertionError("the graph has a cycle; no node is ready to run")
        current = not current
        ready.sort()
    return groups


def order_units(subgraph: Subgraph, units: Sequence[Unit]) -> list[int]:
    """A deterministic execution order of units (Kahn's algorithm, lowest first node first)."""
    deps = _unit_deps(subgraph, units)
    waiting = [len(d) for d in deps]
    dependents: list[list[int]] = [[] for _ in units]
    for u, ds in enumerate(deps):
        for d in ds:
            dependents[d].append(u)
    ready = [u for u in range(len(units)) if waiting[u] == 0]
    order: list[int] = []
    while ready:
        ready.sort(key=lambda u: min(units[u].nodes))
        u = ready.pop(0)
        order.append(u)
        for v in dependents[u]:
            waiting[v] -= 1
            if waiting[v] == 0:
                ready.append(v)
    if len(order) != len(units):
        raise AssertionError("partitioning produced a cycle; this is a bug in offload")
    return order


def finish_partition(
    subgraph: Subgraph, index: int, delegate: str, nodes: Sequence[int]
) -> Partition:
    """Compute a partition's boundary: runtime inputs, constants used, outputs read outside."""
    members = set(nodes)
    produced = {t for n in nodes for t in subgraph.nodes[n].outputs}
    tensors = subgraph.tensors
    inputs: list[int] = []
    constants: list[int] = []
    for n in nodes:
        for t in subgraph.nodes[n].inputs:
            if t < 0 or t in produced:
                continue
            target = constants if tensors[t].is_constant and not tensors[t].is_variable else inputs
            if t not in target:
                target.append(t)
    read_outside = {
        t for node in subgraph.nodes if node.index not in members for t in node.inputs if t >= 0
    }
    graph_outputs = set(subgraph.outputs)
    outputs = [
        t
        for n in nodes
        for t in subgraph.nodes[n].outputs
        if t in read_outside or t in graph_outputs
    ]
    return Partition(
        index=index,
        delegate=delegate,
        nodes=tuple(sorted(nodes)),
        inputs=tuple(inputs),
        outputs=tuple(dict.fromkeys(outputs)),
        constants=tuple(constants),
    )

"""The execution plan: which delegate runs which nodes, in what order, and why the rest fell back.

A plan is data. It can be printed (``offload check``), serialized (``--json``), compared and
drawn; the interpreter only reads it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from offload._fold import FOLDABLE_OPS, fold_constants
from offload._partition import (
    Partition,
    Unit,
    check_execution_order,
    finish_partition,
    group_units,
    initial_units,
    order_units,
)

if TYPE_CHECKING:
    from offload._delegate import Delegate
    from offload._graph import Model, Subgraph

__all__ = ["Plan", "Step", "make_plan", "CPU"]

CPU = "cpu"


@dataclass(frozen=True)
class Step:
    kind: Literal["cpu", "delegate"]
    index: int  # node index for a CPU step, partition index for a delegate step


@dataclass
class Plan:
    subgraph: Subgraph
    model_type: str
    delegates: tuple[str, ...]
    partitions: list[Partition]
    steps: list[Step]
    # delegate name -> node index -> why that delegate did not take the node
    node_reasons: dict[str, dict[int, str]] = field(default_factory=dict)
    # delegate name -> why it rejected the whole model (model type, platform)
    model_rejections: dict[str, str] = field(default_factory=dict)
    # Nodes the core ran once before planning (DEQUANTIZE / DENSIFY of constants): their
    # outputs are constants of ``subgraph``; they are in no step (see offload._fold).
    folded: tuple[int, ...] = ()
    # DEQUANTIZE / DENSIFY of constants that are state, not weights (an LSTM state dequantized
    # from float16 zeros): the CPU reference runs them at allocate_tensors and again at reset,
    # so they are offered to no delegate and are not a fallback.
    state_init: tuple[int, ...] = ()

    def cpu_nodes(self) -> list[int]:
        return [s.index for s in self.steps if s.kind == "cpu"]

    def fallback_nodes(self) -> list[int]:
        """The CPU nodes a delegate could have taken: all but the state initialisers."""
        state = set(self.state_init)
        return [n for n in self.cpu_nodes() if n not in state]

    def nodes_of(self, delegate: str) -> list[int]:
        return [n for p in self.partitions if p.delegate == delegate for n in p.nodes]

    def refusals(self) -> dict[str, dict[int, str]]:
        """Per delegate of the plan, in priority order: the reason it gave for each node left
        on the CPU (its whole-model rejection, where it rejected the model)."""
        out: dict[str, dict[int, str]] = {d: {} for d in self.delegates}
        for n in self.fallback_nodes():
            for delegate in self.delegates:
                reason = self.model_rejections.get(delegate) or self.node_reasons.get(
                    delegate, {}
                ).get(n)
                if reason:
                    out[delegate][n] = reason
        return out

    def fallback_summary(
        self, refusals: dict[str, dict[int, str]] | None = None
    ) -> dict[str, dict[str, Any]]:
        """Per op left on the CPU: how many nodes, and each delegate's reasons with node lists.

        ``refusals`` (delegate -> node -> reason) stands for the plan's own :meth:`refusals`:
        what delegates said of these nodes in other plans of the model (auto's candidates)."""
        by_delegate = self.refusals() if refusals is None else refusals
        summary: dict[str, dict[str, Any]] = {}
        nodes = self.subgraph.nodes
        for n in self.fallback_nodes():
            entry = summary.setdefault(nodes[n].op_name, {"count": 0, "reasons": {}})
            entry["count"] += 1
            for delegate, reasons in by_delegate.items():
                reason = reasons.get(n)
                if reason:
                    entry["reasons"].setdefault(delegate, {}).setdefault(reason, []).append(n)
        return summary

    def to_dict(self) -> dict[str, Any]:
        tensors = self.subgraph.tensors
        per_delegate: dict[str, Any] = {}
        for name in self.delegates:
            parts = [p for p in self.partitions if p.delegate == name]
            per_delegate[name] = {
                "nodes": self.nodes_of(name),
                "partitions": [
                    {
                        "index": p.index,
                        "nodes": list(p.nodes),
                        "inputs": list(p.inputs),
                        "outputs": list(p.outputs),
                        "bytes_copied_per_invoke": sum(
                            _nbytes(tensors[t]) for t in (*p.inputs, *p.outputs)
                        ),
                    }
                    for p in parts
                ],
                "rejected_model": self.model_rejections.get(name),
            }
        return {
            "model_type": self.model_type,
            "node_count": len(self.subgraph.nodes),
            "delegates": per_delegate,
            "cpu": {"nodes": self.cpu_nodes()},
            "fallback": self.fallback_summary(),
            "steps": [{"kind": s.kind, "index": s.index} for s in self.steps],
            "state_init": list(self.state_init),
            "folded": {
                "nodes": list(self.folded),
                "tensors": [t for n in self.folded for t in self.subgraph.nodes[n].outputs],
            },
        }


def _nbytes(tensor: Any) -> int:
    count = 1
    for d in tensor.shape:
        count *= max(int(d), 1)
    return count * tensor.dtype.itemsize


def _unique_names(delegates: Sequence[Delegate]) -> list[str]:
    names: list[str] = []
    for d in delegates:
        name, k = d.name, 2
        while name in names:
            name, k = f"{d.name}#{k}", k + 1
        names.append(name)
    return names


def make_plan(
    model: Model,
    subgraph: Subgraph,
    delegates: Sequence[Delegate],
    folded: Collection[int] | None = None,
) -> Plan:
    """Offer the graph to each delegate in priority order; the CPU reference takes the rest.

    ``folded``: the nodes already folded into constants of ``subgraph`` (the interpreter folds
    once, after correcting declared shapes); None folds here (see :func:`fold_constants`).
    Folded nodes are offered to no delegate and planned into no step.

    Raises :class:`offload.errors.InvalidGraphError` when the operators are not in execution
    order (see :func:`offload._partition.check_execution_order`).
    """
    check_execution_order(subgraph)
    if folded is None:
        folding = fold_constants(subgraph)
        subgraph, folded = folding.subgraph, folding.nodes
    folded = tuple(sorted(folded))
    state_init = _state_initialisers(subgraph, folded)
    names = _unique_names(delegates)
    units: list[Unit] = initial_units(subgraph, folded)
    node_reasons: dict[str, dict[int, str]] = {}
    rejections: dict[str, str] = {}
    for delegate, name in zip(delegates, names):
        rejection = delegate.model_type_reason(model)
        if rejection:
            rejections[name] = rejection
            continue
        reasons: dict[int, str] = {}
        for unit in units:
            if unit.owner is None and unit.nodes[0] not in state_init:
                node = subgraph.nodes[unit.nodes[0]]
                try:
                    reason = delegate.is_node_supported(node, subgraph)
                except Exception as exc:  # a buggy check must not take the whole plan down
                    reason = f"is_node_supported raised {type(exc).__name__}: {exc}"
                if reason:
                    reasons[node.index] = reason

        def unclaimed(u: Any, r: dict[int, str] = reasons) -> bool:
            return u.owner is None and u.nodes[0] not in r and u.nodes[0] not in state_init

        groups = group_units(subgraph, units, unclaimed)
        kept = _apply_limits(groups, units, delegate, reasons)
        node_reasons[name] = reasons
        if kept:
            taken = {u for g in kept for u in g}
            merged = [
                Unit(nodes=sorted(n for u in g for n in units[u].nodes), owner=name) for g in kept
            ]
            units = [u for i, u in enumerate(units) if i not in taken] + merged
    order = order_units(subgraph, units)
    consumers = subgraph.consumers()
    partitions: list[Partition] = []
    steps: list[Step] = []
    for u in order:
        unit = units[u]
        if unit.owner is None:
            steps.append(Step("cpu", unit.nodes[0]))
        else:
            partitions.append(
                finish_partition(subgraph, len(partitions), unit.owner, unit.nodes, consumers)
            )
            steps.append(Step("delegate", len(partitions) - 1))
    return Plan(
        subgraph=subgraph,
        model_type=model.model_type,
        delegates=tuple(names),
        partitions=partitions,
        steps=steps,
        node_reasons=node_reasons,
        model_rejections=rejections,
        folded=folded,
        state_init=tuple(sorted(state_init)),
    )


def _state_initialisers(subgraph: Subgraph, folded: Collection[int]) -> set[int]:
    """Foldable nodes of constants (chains too) that folding left alone: their outputs are
    state, which the executor computes at allocate and again at reset."""
    skip = set(folded)
    tensors = subgraph.tensors
    made: set[int] = set()  # outputs of the state initialisers found so far, in file order
    found: set[int] = set()
    for node in subgraph.nodes:
        if node.op not in FOLDABLE_OPS or node.index in skip or node.is_custom:
            continue
        if node.inputs and all(i < 0 or tensors[i].is_constant or i in made for i in node.inputs):
            found.add(node.index)
            made.update(t for t in node.outputs if t >= 0)
    return found


def _apply_limits(
    groups: list[list[int]], units: Sequence[Unit], delegate: Delegate, reasons: dict[int, str]
) -> list[list[int]]:
    options = delegate.options
    min_nodes = getattr(options, "min_nodes_per_partition", 1) or 1
    max_parts = getattr(options, "max_delegated_partitions", None)

    # Sizes once per group: a reason is written per node, and recounting the group for each
    # of its nodes would be quadratic in the group's size.
    sizes = [sum(len(units[u].nodes) for u in g) for g in groups]
    kept: list[list[int]] = []
    kept_sizes: list[int] = []
    for g, size in zip(groups, sizes):
        if size < min_nodes:
            reason = (
                f"its partition has {size} node(s), fewer than min_nodes_per_partition={min_nodes}"
            )
            for u in g:
                for n in units[u].nodes:
                    reasons[n] = reason
        else:
            kept.append(g)
            kept_sizes.append(size)
    if max_parts is not None and len(kept) > max_parts:
        ranked = sorted(range(len(kept)), key=lambda i: (-kept_sizes[i], i))
        keep = set(ranked[:max_parts])
        for i, g in enumerate(kept):
            if i not in keep:
                reason = (
                    f"only the {max_parts} largest partition(s) are delegated "
                    f"(max_delegated_partitions={max_parts}); "
                    f"this one has {kept_sizes[i]} node(s)"
                )
                for u in g:
                    for n in units[u].nodes:
                        reasons[n] = reason
        kept = [g for i, g in enumerate(kept) if i in keep]
    return kept

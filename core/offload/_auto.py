"""``delegates="auto"``: which installed delegate to use for a model, and why.

The rule, so that it can be tested and explained:

1. Candidates are the installed delegates that are available here, whose platforms include
   this one, and whose capability for the model's type is not "no".
2. Each candidate is planned alone (with its default options). Its estimated cost, in units
   of one CPU-reference node, is ``cpu_nodes + delegated_nodes / expected_speedup +
   partitions * partition_overhead`` (both figures from the delegate's Capabilities). The CPU
   alone costs ``node_count``.
3. The cheapest plan wins; ties go to the CPU. So a plan that splits the graph into many small
   partitions loses to the CPU, as LiteRT's documentation warns it usually does in practice.

The rule is documented for users and delegate authors in docs/delegate-authors.md; the figures
behind one choice are ``Interpreter.auto_selection`` and ``offload check --delegate auto``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from offload._plan import make_plan
from offload._plugins import list_delegates

if TYPE_CHECKING:
    from offload._delegate import Delegate
    from offload._graph import Model

__all__ = ["choose_delegates", "plan_cost", "COST_FORMULA"]

COST_FORMULA = "cpu_nodes + delegated_nodes / expected_speedup + partitions * partition_overhead"


def plan_cost(
    node_count: int, cpu_nodes: int, partition_sizes: list[int], speedup: float, overhead: float
) -> float:
    return cpu_nodes + sum(partition_sizes) / speedup + len(partition_sizes) * overhead


def _platform_ok(platforms: tuple[str, ...]) -> bool:
    return "any" in platforms or any(sys.platform.startswith(p) for p in platforms)


def choose_delegates(model: Model) -> tuple[list[Delegate], dict[str, Any]]:
    """The delegates to use for ``model`` (zero or one) and the figures behind the choice."""
    sg = model.main
    n = len(sg.nodes)
    considered: list[dict[str, Any]] = []
    best: tuple[float, Delegate | None] = (float(n), None)
    for record in list_delegates():
        entry: dict[str, Any] = {"delegate": record.name}
        considered.append(entry)
        if not record.availability.available:
            entry["skipped"] = f"unavailable: {record.availability.reason}"
            continue
        caps = record.cls.CAPABILITIES
        if not _platform_ok(caps.platforms):
            entry["skipped"] = f"platform {sys.platform} not in {list(caps.platforms)}"
            continue
        if caps.model_types[model.model_type].support == "no":
            entry["skipped"] = f"does not support {model.model_type} models"
            continue
        try:
            delegate = record.cls()
            plan = make_plan(model, sg, [delegate])
        except Exception as exc:  # one broken delegate must not break auto selection
            entry["skipped"] = f"planning failed: {type(exc).__name__}: {exc}"
            continue
        sizes = [len(p.nodes) for p in plan.partitions]
        cost = plan_cost(
            n, len(plan.cpu_nodes()), sizes, caps.expected_speedup, caps.partition_overhead
        )
        entry.update(
            {
                "partitions": len(sizes),
                "delegated_nodes": sum(sizes),
                "cpu_nodes": len(plan.cpu_nodes()),
                "expected_speedup": caps.expected_speedup,
                "partition_overhead": caps.partition_overhead,
                "cost": cost,
            }
        )
        if cost < best[0]:
            best = (cost, delegate)
    chosen = [best[1]] if best[1] is not None else []
    summary = {
        "rule": "lowest estimated cost; CPU alone costs one unit per node",
        "formula": COST_FORMULA,
        "cpu_cost": float(n),
        "considered": considered,
        "chosen": [d.name for d in chosen] or ["cpu"],
    }
    return chosen, summary

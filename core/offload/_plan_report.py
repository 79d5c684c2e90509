"""The plan report: what ``offload check`` prints and writes as JSON, and what
CompiledModel's refusal and the sweep's partition maps read: the model, its op histogram,
the partition plan per delegate, each op left on the CPU with every delegate's reason, and
the ops the CPU reference has no kernel for. Data only; :mod:`offload._report_text` renders
it as text, :func:`offload._formatting.json_safe` as JSON."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from offload._delegate import Delegate
from offload._graph import Model
from offload._plan import Plan, make_plan
from offload.errors import OffloadError
from offload.ops import kernel_class

__all__ = ["DelegateChoice", "fallback_rows", "missing_cpu_kernels", "plan_report"]


@dataclass
class DelegateChoice:
    """A requested delegate: the object (built even if unavailable) and whether it can run here."""

    name: str
    delegate: Delegate
    available: bool
    reason: str = ""


def fallback_rows(
    plan: Plan,
    refusals: dict[str, dict[int, str]] | None = None,
    nodes: Sequence[int] | None = None,
) -> list[dict[str, Any]]:
    """Per op left on the CPU: its count and nodes, and each delegate's reasons with the
    nodes each reason holds for: the plan's own reasons, or ``refusals`` (delegate -> node ->
    reason, see :meth:`Plan.fallback_summary`); only ``nodes`` where given."""
    keep = None if nodes is None else set(nodes)
    rows = []
    for op, entry in plan.fallback_summary(refusals).items():
        held = [
            n
            for n in plan.fallback_nodes()
            if plan.subgraph.nodes[n].op_name == op and (keep is None or n in keep)
        ]
        if not held:
            continue
        rows.append(
            {
                "op": op,
                "count": len(held),
                "nodes": held,
                "reasons": [
                    {"delegate": d, "reason": r, "nodes": kept}
                    for d, by in entry["reasons"].items()
                    for r, ns in by.items()
                    if (kept := [n for n in ns if keep is None or n in keep])
                ],
            }
        )
    return rows


def missing_cpu_kernels(model: Model, plan: Plan) -> dict[str, str]:
    missing: dict[str, str] = {}
    for n in plan.cpu_nodes():
        node = model.main.nodes[n]
        key = node.op_name
        if key in missing:
            continue
        try:
            kernel_class(node)
        except OffloadError as exc:
            missing[key] = str(exc)
    return missing


def plan_report(
    path: str,
    model: Model,
    choices: Sequence[DelegateChoice],
    auto: Any = None,
    default: Any = None,
) -> tuple[dict[str, Any], Plan]:
    """The report of the plan of ``model`` with ``choices`` (what ``offload check --json``
    prints), and that plan."""
    plan = make_plan(model, model.main, [c.delegate for c in choices])
    raw = plan.to_dict()
    delegates: dict[str, Any] = {}
    partitions: list[dict[str, Any]] = []
    for choice, name in zip(choices, plan.delegates):
        entry = raw["delegates"][name]
        boundary = {t for p in entry["partitions"] for t in (*p["inputs"], *p["outputs"])}
        delegates[name] = {
            "delegate": choice.delegate.name,
            "version": choice.delegate.version,
            "available": choice.available,
            "reason": choice.reason,
            "options": choice.delegate.options.model_dump(exclude_defaults=True),
            "nodes": entry["nodes"],
            "partitions": entry["partitions"],
            "boundary_tensors": len(boundary),
            "bytes_copied_per_invoke": sum(
                p["bytes_copied_per_invoke"] for p in entry["partitions"]
            ),
            "rejected_model": entry["rejected_model"],
        }
        partitions += [{**p, "delegate": name} for p in entry["partitions"]]
    partitions.sort(key=lambda p: p["index"])
    fallback = fallback_rows(plan)
    main = model.main
    report: dict[str, Any] = {
        "model": {
            "path": path,
            "size_bytes": os.path.getsize(path) if os.path.exists(path) else None,
            "model_type": model.model_type,
            "model_type_reason": model.model_type_reason,
            "subgraphs": len(model.subgraphs),
            "nodes": len(main.nodes),
            "tensors": len(main.tensors),
        },
        "op_histogram": model.op_histogram(),
        "plan": {
            "delegates": delegates,
            "cpu": {"nodes": raw["cpu"]["nodes"]},
            "partitions": partitions,
            "steps": raw["steps"],
        },
        "fallback": fallback,
        "cpu_missing_kernels": missing_cpu_kernels(model, plan),
    }
    if auto is not None:
        report["auto"] = auto
    if default is not None:
        report["default"] = default
    return report, plan

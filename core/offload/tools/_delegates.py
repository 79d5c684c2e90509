"""``offload delegates``: what is installed, what can run here, and what each supports."""

from __future__ import annotations

import argparse
from typing import Any

from offload._graph import MODEL_TYPES
from offload._matrix import capability_matrix
from offload._plugins import list_plugins
from offload.tools._common import EXIT_OK, add_json_arg, format_table, print_json


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "delegates",
        help="list installed delegates, their availability and the capability matrix",
        description="Installed delegates (version, availability and why not), plugins that "
        "failed to load, the capability matrix (model types x delegates) and per-op support.",
    )
    add_json_arg(p)
    p.set_defaults(func=run)


def collect() -> dict[str, Any]:
    matrix = capability_matrix()
    plugins = [
        {
            "name": r.name,
            "distribution": r.distribution,
            "version": r.version,
            "status": r.status,
            "error": r.error,
            "delegates": [d.name for d in r.delegates],
        }
        for r in list_plugins()
    ]
    return {
        "delegates": matrix["delegates"],
        "plugins": plugins,
        "failed_plugins": [p for p in plugins if p["status"] != "loaded"],
        "model_types": matrix["model_types"],
        "ops": matrix["ops"],
    }


def run(args: argparse.Namespace) -> int:
    data = collect()
    if args.json:
        print_json(data)
        return EXIT_OK
    delegates = data["delegates"]
    print("Delegates")
    rows = [
        [name, d["version"], d.get("plugin", ""), "yes" if d["available"] else "no", d["reason"]]
        for name, d in delegates.items()
    ]
    print(format_table(["name", "version", "plugin", "available", "reason"], rows, "  "))
    failed = data["failed_plugins"]
    if failed:
        print("\nPlugins that failed to load")
        rows = [
            [p["name"], p["distribution"], p["version"], p["status"], p["error"]] for p in failed
        ]
        print(format_table(["plugin", "distribution", "version", "status", "error"], rows, "  "))
    names = list(delegates)
    print("\nCapability matrix (model type x delegate)")
    rows = []
    reasons = []
    for t in MODEL_TYPES:
        row = [t]
        for n in names:
            cell = data["model_types"][t].get(n, {"support": "?", "reason": ""})
            row.append(cell["support"])
            if cell["reason"] and n != "cpu":
                reasons.append(f"  {n} / {t}: {cell['support']}: {cell['reason']}")
        rows.append(row)
    print(format_table(["model type", *names], rows, "  "))
    if reasons:
        print("\n".join(sorted(reasons, key=lambda line: line.split(" / ")[0])))
    print("\nOp support (versions and dtypes; '-' = not supported, '*' = constraints below)")
    rows = []
    notes = []
    for op, by in data["ops"].items():
        row = [op]
        for n in names:
            text = by.get(n, "-")
            short, _, constraint = text.partition(" (")
            if constraint:
                notes.append(f"  {op} / {n}: {constraint.removesuffix(')')}")
                short += "*"
            row.append(short)
        rows.append(row)
    print(format_table(["op", *names], rows, "  "))
    if notes:
        print("\nConstraints")
        print("\n".join(notes))
    return EXIT_OK

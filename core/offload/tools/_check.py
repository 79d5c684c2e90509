"""``offload check MODEL``: model type, op histogram, the partition plan and why nodes fell back.

The plan is data: it is computed without running anything, so a delegate that is installed
but unavailable here is still planned (with default options plus any given) and shown as
unavailable with its reason. Two exceptions: ``--delegate auto`` measures the candidate plans
(or takes the remembered decision) and prints every candidate's figures; with no
``--delegate``, the plan is that of offload's default delegates (what
``offload.Interpreter(MODEL)`` runs, chosen without timing), and ``--delegate cpu`` plans the
CPU reference alone.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from offload._graph import Model
from offload._interpreter import Interpreter
from offload._loader import load_model
from offload._plan import Plan, make_plan
from offload.errors import OffloadError
from offload.ops import kernel_class
from offload.tools._common import (
    CPU_CHOICE,
    EXIT_FAILED,
    EXIT_OK,
    DelegateChoice,
    UsageError,
    add_delegate_args,
    add_json_arg,
    build_delegates,
    check_output_file,
    fit_table,
    format_error,
    interpreter_options,
    print_json,
    requested_delegates,
    wrap_text,
    write_output,
)
from offload.tools._graph_draw import _ranges, plan_html, plan_svg


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="show the model type, op histogram, partition plan and fallback reasons",
        description="Plan MODEL for the given delegates without running it: per delegate the "
        "nodes, partitions, boundary tensors and bytes copied per invoke; for every op left "
        "on the CPU, each delegate's reason.",
    )
    p.add_argument("model", help="path to a .tflite model")
    add_delegate_args(p)
    add_json_arg(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--html", metavar="FILE", help="write an HTML report with the graph drawn")
    out.add_argument("--svg", metavar="FILE", help="write the graph, coloured by delegate, as SVG")
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 if any node is left on the CPU while delegates were asked for, or if the "
        "CPU reference has no kernel for a node it must run",
    )
    p.set_defaults(func=run)


def _choices(args: argparse.Namespace) -> tuple[list[DelegateChoice], Any, Any]:
    """The delegates to plan, the auto figures (if any), and which default applied (if any).

    ``--delegate auto`` measures here (or takes the remembered decision); no ``--delegate``
    shows what ``offload.Interpreter(MODEL)`` would run, which times nothing.
    """
    pairs = requested_delegates(args)
    names = [n for n, _ in pairs]
    if names == [CPU_CHOICE]:
        return [], None, None
    if names in (["auto"], []):
        delegates = "auto" if names else None
        it = Interpreter(model_path=args.model, delegates=delegates, **interpreter_options(args))
        chosen = [DelegateChoice(d.name, d, True) for d in it.delegates]
        return chosen, it.auto_selection, None if names else it._selection.describe()
    if "auto" in names or CPU_CHOICE in names:
        raise UsageError(
            "--delegate auto and --delegate cpu cannot be combined with other delegates"
        )
    return build_delegates(pairs, allow_unavailable=True), None, None


def _missing_cpu_kernels(model: Model, plan: Plan) -> dict[str, str]:
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


def collect(
    path: str,
    model: Model,
    choices: list[DelegateChoice],
    auto: Any = None,
    default: Any = None,
) -> tuple[dict[str, Any], Plan]:
    """The check report (what ``--json`` prints) and the plan it describes."""
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
    fallback = []
    for op, entry in plan.fallback_summary().items():
        nodes = [
            n
            for n in plan.cpu_nodes()
            if (model.main.nodes[n].custom_code or model.main.nodes[n].op) == op
        ]
        fallback.append(
            {
                "op": op,
                "count": entry["count"],
                "nodes": nodes,
                "reasons": [
                    {"delegate": d, "reason": r, "nodes": ns}
                    for d, by in entry["reasons"].items()
                    for r, ns in by.items()
                ],
            }
        )
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
        "cpu_missing_kernels": _missing_cpu_kernels(model, plan),
    }
    if auto is not None:
        report["auto"] = auto
    if default is not None:
        report["default"] = default
    return report, plan


def _say(text: str, indent: str = "") -> None:
    """One line of the report, wrapped under its indent (reasons and lists can be long)."""
    print(wrap_text(text, indent))


# A table cell's node ranges are cut after this many characters: a fragmented partition lists
# hundreds of ranges, which --json and the HTML report carry in full.
_RANGES_CELL = 32


def _ranges_cell(nodes: list[int]) -> str:
    text = _ranges(nodes)
    if len(text) <= _RANGES_CELL:
        return text
    head = text[: _RANGES_CELL - 10].rsplit(", ", 1)[0]
    return f"{head}, ... ({len(nodes)})"


def print_text(report: dict[str, Any]) -> None:
    m = report["model"]
    _say(f"Model: {m['path']}")
    _say(f"type: {m['model_type']} (decided by {m['model_type_reason']})", "  ")
    _say(f"subgraphs: {m['subgraphs']}, nodes: {m['nodes']}, tensors: {m['tensors']}", "  ")
    print("\nOp histogram")
    print(fit_table(["op", "count"], report["op_histogram"].items(), "  "))
    delegates = report["plan"]["delegates"]
    order = ", ".join(delegates) or "none (everything runs on the CPU reference)"
    print()
    _say(f"Partition plan (delegates in priority order: {order})")
    rows = [
        [
            name,
            "yes" if d["available"] else "NO",
            len(d["nodes"]),
            len(d["partitions"]),
            d["boundary_tensors"],
            d["bytes_copied_per_invoke"],
        ]
        for name, d in delegates.items()
    ]
    rows.append(["cpu", "yes", len(report["plan"]["cpu"]["nodes"]), "", "", ""])
    print(
        fit_table(
            [
                "delegate",
                "available",
                "nodes",
                "partitions",
                "boundary tensors",
                "bytes copied/invoke",
            ],
            rows,
            "  ",
        )
    )
    for name, d in delegates.items():
        if not d["available"]:
            _say(
                f"{name} is installed but unavailable here: {d['reason']} "
                "(planned anyway; at run time these nodes would run on the CPU)",
                "  ",
            )
        if d["rejected_model"]:
            _say(f"{name} rejects the whole model: {d['rejected_model']}", "  ")
    if report["plan"]["partitions"]:
        print("\nPartitions")
        rows = [
            [
                f"#{p['index']}",
                p["delegate"],
                _ranges_cell(p["nodes"]),
                len(p["inputs"]),
                len(p["outputs"]),
                p["bytes_copied_per_invoke"],
            ]
            for p in report["plan"]["partitions"]
        ]
        print(
            fit_table(
                ["partition", "delegate", "nodes", "inputs", "outputs", "bytes copied"], rows, "  "
            )
        )
    if report["fallback"] and delegates:
        print("\nLeft on the CPU (per op)")
        for f in report["fallback"]:
            _say(f"{f['op']} x{f['count']} (nodes {_ranges(f['nodes'])})", "  ")
            for r in f["reasons"]:
                _say(
                    f"{r['delegate']}: cannot handle {len(r['nodes'])} node(s) "
                    f"[{_ranges(r['nodes'])}]: {r['reason']}",
                    "    ",
                )
    if "default" in report and report["default"]["mode"] == "default":
        d = report["default"]
        print()
        _say(
            f"Default delegates: {', '.join(d['applied'])} (from {d['source']}): "
            f"{d.get('reason') or d['why']}"
        )
    if "auto" in report and report["auto"].get("mode") != "default":
        _print_auto(report["auto"])
    if report["cpu_missing_kernels"]:
        print("\nThe CPU reference has no kernel for")
        for op, reason in report["cpu_missing_kernels"].items():
            _say(f"{op}: {reason}", "  ")


# A new driver or package version can move dozens of settings at once (each ICD file, each
# requirement's version); the first few say what kind of change it was.
_SHOWN_DIFFERENCES = 12


def _ms(value: Any) -> str:
    return "" if value is None else f"{value:.3g}"


def _print_auto(auto: dict[str, Any]) -> None:
    """The figures behind the auto choice (docs/delegate-authors.md, "auto")."""
    cache = auto.get("cache") or {}
    origin = "remembered, no timing" if auto.get("from_cache") else auto.get("mode", "")
    print()
    _say(f"Auto choice: {', '.join(auto['chosen'])} ({origin})")
    _say(f"why: {auto['reason']}", "  ")
    if cache.get("differences"):
        # One setting a line: the key is what a reader looks for, the values follow it.
        _say(f"decision cache: {cache['status']} ({cache.get('path')})", "  ")
        _say("the stored decision was made with other settings (stored -> now):", "    ")
        for d in cache["differences"][:_SHOWN_DIFFERENCES]:
            _say(f"{d['key']}: {d['stored']} -> {d['now']}", "      ")
        more = len(cache["differences"]) - _SHOWN_DIFFERENCES
        if more > 0:
            _say(f"and {more} more (--json lists them all)", "      ")
    elif cache.get("status") not in (None, "not used"):
        detail = f": {cache['detail']}" if cache.get("detail") else ""
        _say(f"decision cache: {cache['status']}{detail} ({cache.get('path')})", "  ")
    spent = [
        f"{label} {auto[key]:.3g} s"
        for key, label in (
            ("choosing_s", "choosing"),
            ("measure_s", "timed runs"),
            ("prepare_s", "preparing"),
        )
        if auto.get(key) is not None
    ]
    budget = f"budget {auto['budget_s']:g} s" if auto.get("budget_s") is not None else ""
    _say(", ".join([budget, *spent]) if budget else ", ".join(spent), "  ")
    if auto.get("accuracy"):
        a = auto["accuracy"]
        _say(
            f"accuracy policy: floats within {a['float_relative']:g} of max |reference|, "
            f"quantized outputs within {a['quantized_steps']} step(s)",
            "  ",
        )
    if auto.get("gate"):
        gate = auto["gate"]
        _say(
            f"accuracy gate: worst case over {len(gate['inputs'])} input set(s): "
            f"{', '.join(gate['inputs'])}",
            "  ",
        )
    candidates = auto.get("candidates", [])
    # Two tables, the plans and their timings, each with the plan's label: as one table the
    # eleven columns are 150 characters wide for labels such as "litert(kernels=builtin)".
    plans = [
        [
            c["label"],
            c.get("partitions", ""),
            c.get("delegated_nodes", ""),
            c.get("cpu_nodes", ""),
            f"{c['static_cost']:.4g}" if c.get("static_cost") is not None else "",
            c["status"],
        ]
        for c in candidates
    ]
    if plans:
        headers = ["plan", "partitions", "delegated", "cpu nodes", "static cost", "status"]
        print(fit_table(headers, plans, "  "))
    timed = [
        [
            c["label"],
            _ms(c.get("prepare_ms")),
            _ms(c.get("median_ms")),
            f"{_ms(c.get('min_ms'))}-{_ms(c.get('max_ms'))}" if c.get("runs") else "",
            c.get("runs", ""),
            format_error(c.get("error")),
        ]
        for c in candidates
        if c.get("prepare_ms") is not None or c.get("runs") or c.get("error") is not None
    ]
    if timed:
        headers = ["plan", "prepare ms", "median ms", "spread ms", "runs", "error"]
        print()
        print(fit_table(headers, timed, "  "))
    for c in candidates:
        if c.get("reason") and c["status"] != "chosen":
            _say(f"{c['label']}: {c['status']}: {c['reason']}", "  ")
    for entry in auto.get("skipped", []):
        _say(f"{entry['delegate']}: not a candidate: {entry['reason']}", "  ")


def run(args: argparse.Namespace) -> int:
    if not Path(args.model).is_file():
        raise UsageError(f"model {args.model!r}: no such file")
    for option, path in (("--html", args.html), ("--svg", args.svg)):
        if path:
            check_output_file(path, option)
    model = load_model(model_path=args.model)
    choices, auto, default = _choices(args)
    report, plan = collect(args.model, model, choices, auto, default)
    unavailable = {
        n: d["reason"] for n, d in report["plan"]["delegates"].items() if not d["available"]
    }
    if args.html:
        page = plan_html(report, plan, unavailable)
        write_output(args.html, "--html", lambda p: p.write_text(page, encoding="utf-8"))
        report["html"] = args.html
    if args.svg:
        drawing = plan_svg(plan, unavailable)
        write_output(args.svg, "--svg", lambda p: p.write_text(drawing, encoding="utf-8"))
        report["svg"] = args.svg
    if args.json:
        print_json(report)
    else:
        print_text(report)
        for kind in ("html", "svg"):
            if kind in report:
                print(f"\nwrote {report[kind]}")
    asked = bool(choices) and default is None  # the default's choice was not asked for
    if args.strict and (
        (asked and report["plan"]["cpu"]["nodes"]) or report["cpu_missing_kernels"]
    ):
        return EXIT_FAILED
    return EXIT_OK

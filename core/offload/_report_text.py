"""The plan report and auto's figures as text: the one text rendering of what
:mod:`offload._plan_report` and ``auto_selection`` hold, for ``offload check``, ``make demo``
and CompiledModel's refusal; every line within TEXT_WIDTH (a name or path longer than a line
stays whole)."""

from __future__ import annotations

import functools
from typing import Any

from offload._formatting import fit_table, format_error, node_ranges, wrap_text

__all__ = ["fallback_lines", "render_auto", "render_text"]


def _line(out: list[str], text: str, indent: str = "") -> None:
    """One line of a report, wrapped under its indent (reasons and lists can be long)."""
    out.append(wrap_text(text, indent))


def fallback_lines(rows: list[dict[str, Any]], indent: str = "  ") -> list[str]:
    """Per op left on the CPU (:func:`offload._plan_report.fallback_rows`): the op, its count
    and nodes, then each delegate's reason with the nodes it holds for."""
    out: list[str] = []
    for f in rows:
        _line(out, f"{f['op']} x{f['count']} (nodes {node_ranges(f['nodes'])})", indent)
        for r in f["reasons"]:
            _line(
                out,
                f"{r['delegate']}: cannot handle {len(r['nodes'])} node(s) "
                f"[{node_ranges(r['nodes'])}]: {r['reason']}",
                indent + "  ",
            )
    return out


# A table cell's node ranges are cut after this many characters: a fragmented partition lists
# hundreds of ranges, which --json and the HTML report carry in full.
_RANGES_CELL = 32


def _ranges_cell(nodes: list[int]) -> str:
    text = node_ranges(nodes)
    if len(text) <= _RANGES_CELL:
        return text
    head = text[: _RANGES_CELL - 10].rsplit(", ", 1)[0]
    return f"{head}, ... ({len(nodes)})"


def render_text(report: dict[str, Any]) -> str:
    """The plan report (:func:`offload._plan_report.plan_report`) as ``offload check`` prints
    it: lines no wider than TEXT_WIDTH."""
    out: list[str] = []
    _say = functools.partial(_line, out)
    m = report["model"]
    _say(f"Model: {m['path']}")
    _say(f"type: {m['model_type']} (decided by {m['model_type_reason']})", "  ")
    _say(f"subgraphs: {m['subgraphs']}, nodes: {m['nodes']}, tensors: {m['tensors']}", "  ")
    out.append("\nOp histogram")
    out.append(fit_table(["op", "count"], report["op_histogram"].items(), "  "))
    delegates = report["plan"]["delegates"]
    order = ", ".join(delegates) or "none (everything runs on the CPU reference)"
    out.append("")
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
    out.append(
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
        out.append("\nPartitions")
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
        out.append(
            fit_table(
                ["partition", "delegate", "nodes", "inputs", "outputs", "bytes copied"], rows, "  "
            )
        )
    if report["fallback"] and delegates:
        out.append("\nLeft on the CPU (per op)")
        out.extend(fallback_lines(report["fallback"]))
    if "default" in report and report["default"]["mode"] == "default":
        d = report["default"]
        out.append("")
        _say(
            f"Default delegates: {', '.join(d['applied'])} (from {d['source']}): "
            f"{d.get('reason') or d['why']}"
        )
    if "auto" in report and report["auto"].get("mode") != "default":
        out.append(render_auto(report["auto"]))
    if report["cpu_missing_kernels"]:
        out.append("\nThe CPU reference has no kernel for")
        for op, reason in report["cpu_missing_kernels"].items():
            _say(f"{op}: {reason}", "  ")
    return "\n".join(out)


# A new driver or package version can move dozens of settings at once (each ICD file, each
# requirement's version); the first few say what kind of change it was.
_SHOWN_DIFFERENCES = 12


def _ms(value: Any) -> str:
    return "" if value is None else f"{value:.3g}"


def render_auto(auto: dict[str, Any]) -> str:
    """The figures behind the auto choice (docs/delegate-authors.md, "auto"), as text."""
    out: list[str] = []
    _say = functools.partial(_line, out)
    cache = auto.get("cache") or {}
    origin = "remembered, no timing" if auto.get("from_cache") else auto.get("mode", "")
    out.append("")
    _say(f"Auto choice: {', '.join(auto['chosen'])} ({origin})")
    _say(f"why: {auto['reason']}", "  ")
    if auto.get("setting"):
        _say(f"setting: {auto['setting']['text']}", "  ")
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
        out.append(fit_table(headers, plans, "  "))
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
        out.append("")
        out.append(fit_table(headers, timed, "  "))
    for c in candidates:
        if c.get("reason") and c["status"] != "chosen":
            _say(f"{c['label']}: {c['status']}: {c['reason']}", "  ")
    for entry in auto.get("skipped", []):
        _say(f"{entry['delegate']}: not a candidate: {entry['reason']}", "  ")
    return "\n".join(out)

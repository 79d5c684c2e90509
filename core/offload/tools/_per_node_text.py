"""The text ``offload diff --per-node`` prints for a :class:`offload.PerNodeDiff`: the
verdicts first, then the table of divergent (or all) rows. The diff itself, and its JSON, are
the library's (``offload._per_node``, ``offload._per_node_result``).
"""

from __future__ import annotations

import numpy as np

from offload._formatting import format_table
from offload._per_node_result import NodeDiff, PerNodeDiff, format_shape
from offload._seeded_inputs import INPUT_KINDS

__all__ = ["format_text"]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _num(value: float | None, integer: bool = False) -> str:
    if value is None:
        return "-"
    if integer:
        return str(int(value))
    return "0" if value == 0 else f"{value:.3g}"


def _percent(fraction: float | None) -> str:
    if fraction is None:
        return "-"
    text = f"{100 * fraction:.2f}%"
    return "99.99%" if fraction < 1 and text == "100.00%" else text  # never round up to all


def _verdict(row: NodeDiff) -> str:
    if row.status == "diverged":
        return f"DIVERGED ({row.locality})" + (f": {row.note}" if row.note else "")
    if row.status == "agree":
        return "agree"
    return row.note or row.status


def _cells(row: NodeDiff) -> list[str]:
    cmp = row.comparison
    integer = cmp is not None and cmp.kind == "integer"
    name = row.name if len(row.name) <= 40 else row.name[:37] + "..."
    return [
        str(row.node),
        row.op,
        name,
        format_shape(row.shape),
        row.dtype,
        _num(cmp.max_error if cmp else None, integer),
        _num(cmp.relative_error if cmp else None),
        _percent(cmp.equal if cmp else None),
        _verdict(row),
    ]


def _head(row: NodeDiff) -> str:
    """How a verdict line names a row: node, op, tensor, shape and dtype."""
    where = f"node {row.node} {row.op}, tensor {row.tensor} {row.name!r}"
    return f"{where} [{format_shape(row.shape)} {row.dtype}]"


def _describe(row: NodeDiff) -> str:
    cmp = row.comparison
    head = _head(row)
    if row.status == "failed" or cmp is None:
        return f"{head}: {row.note}"
    if cmp.note:
        return f"{head}: {cmp.note} ({row.locality})"
    if cmp.kind == "integer":
        err = f"max |steps| {_num(cmp.max_error, True)}, {_percent(cmp.equal)} exact"
    elif cmp.kind == "float":
        err = (
            f"max abs err {_num(cmp.max_error)}, rel err {_num(cmp.relative_error)}, "
            f"{_percent(cmp.equal)} bit-identical"
        )
    else:
        err = f"{_percent(cmp.equal)} equal"
    return f"{head}: {err} ({row.locality})"


def _describe_inexact(row: NodeDiff) -> str:
    """``row`` as the culprit of a non-local divergence: how far and how many differ."""
    cmp = row.comparison
    assert cmp is not None and cmp.equal is not None  # _inexact_float rows only
    total = int(np.prod(row.shape))
    # ``equal`` is a mean over ``total`` booleans: the count comes back exactly.
    differ = total - round(cmp.equal * total)
    return (
        f"{_head(row)}: max |diff| {_num(cmp.max_error)} (rel {_num(cmp.relative_error)}), "
        f"{differ} of {total} values differ"
    )


def format_text(result: PerNodeDiff, show_all: bool = False) -> str:
    """The report ``offload diff --per-node`` prints: verdicts first, then the table."""
    s = result.summary()
    subgraphs = (
        f"; {result.subgraphs} subgraphs, only the main one (0) is compared"
        if result.subgraphs > 1
        else ""
    )
    lines = [
        f"model: {result.model}{subgraphs}",
        f"reference: {result.reference}   candidate: {result.candidate}",
        f"inputs: {result.input_kind} ({INPUT_KINDS[result.input_kind]}), seed {result.seed}",
        f"tolerance: relative error {result.tolerance:g} (floats), "
        f"{result.tolerance_steps} steps (integers)",
        f"tensors: {s['rows']}: {s['agree']} agree, {s['diverged'] + s['failed']} diverge "
        f"({s['local']} local, {s['inherited']} inherited, {s['n/a']} n/a), "
        f"{s['hidden']} inside a delegate partition, {s['not_run']} not run",
    ]
    for role, report in result.delegation.items():
        parts = []
        for name, d in report["delegates"].items():
            text = f"{name} runs {_count(d['nodes'], 'node')} in "
            text += _count(d["partitions"], "partition")
            if d["restored_to_cpu"]:
                failed = _count(d["restored_to_cpu"], "partition")
                text += f" ({failed} failed and ran on the CPU)"
            if d["rejected_model"]:
                text += f" (it rejected the model: {d['rejected_model']})"
            parts.append(text)
        on_cpu = _count(report["cpu_nodes"], "node")
        lines.append(f"{role}: {'; '.join(parts)}; {on_cpu} on the CPU reference")
    for role, error in result.errors.items():
        label = result.reference if role == "reference" else result.candidate
        lines.append(f"{role} ({label}) failed: {error}")
    first, first_local = result.first_divergence, result.first_local_divergence
    lines.append("first divergence: " + (_describe(first) if first else "none"))
    if first is not None:
        local_text = _describe(first_local) if first_local else "none"
        if not result.locality_checked:
            local_text = "n/a (the candidate's kernels are re-run only when it is 'cpu')"
        lines.append("first local divergence: " + local_text)
        if first.locality != "local":
            # Same condition as first_inexact_float: here "none" is itself an answer (every
            # float before the divergence is bit-identical), not a question left unasked.
            inexact = result.first_inexact_float
            culprit = _describe_inexact(inexact) if inexact else "none"
            if inexact is None:
                culprit += " (every observable float tensor before it is bit-identical)"
            lines.append("first float tensor not bit-identical: " + culprit)
    shown = [r for r in result.rows if show_all or r.diverged]
    if shown:
        lines += [
            "",
            "max err: max |candidate - reference| for floats, max |steps| for integers; "
            "rel err: max err / max |reference|; equal: bit-identical (floats) or exact "
            "(integers)",
            format_table(
                [
                    "node",
                    "op",
                    "tensor",
                    "shape",
                    "dtype",
                    "max err",
                    "rel err",
                    "equal",
                    "verdict",
                ],
                [_cells(r) for r in shown],
            ),
        ]
    return "\n".join(lines)

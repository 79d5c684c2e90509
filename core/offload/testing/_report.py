"""The kit's text report: a line per case and one per declared op, as ``python -m
offload.testing`` prints it."""

from __future__ import annotations

import sys
from typing import TextIO

from offload.testing._runner import ConformanceReport

__all__ = ["format_report", "print_report"]

_STATUSES = ("pass", "fail", "error", "refused", "not-claimed", "excluded")


def format_report(
    report: ConformanceReport, *, strict: bool = True, everything: bool = False
) -> str:
    """The report as text: one line per case (cases of ops the delegate neither declares nor
    takes only with ``everything``), a table of per-op verdicts marking those that fail under
    ``strict``, and the totals."""
    lines: list[str] = []
    listed = {o.op for o in report.ops}
    hidden = 0
    for r in report.results:
        if not everything and r.status == "not-claimed" and r.op not in listed:
            hidden += 1
            continue
        lines.append(f"{r.status:12} {r.case:38} {r.op:18} {r.dtype:8} {r.detail}")
    if hidden:
        lines.append(f"({hidden} cases of ops the delegate does not declare; --all lists them)")
    lines += ["", f"{'op':18} {'verdict':16} pass fail refused not-claimed excluded"]
    for o in report.ops:
        mark = "  <- fails" if o.fails(strict) else ""
        lines.append(
            f"{o.op:18} {o.verdict:16} {o.passed:4} {o.failed:4} {o.refused:7} "
            f"{o.not_claimed:11} {o.excluded:8}{mark}"
        )
        if o.detail and o.verdict != "ok":
            lines.append(f"{'':18} {o.detail}")
        for reason in o.refusals:
            if not (o.detail and o.detail.endswith(reason)):  # all-refused already quotes it
                lines.append(f"{'':18} refused: {reason}")
    counts = {s: sum(r.status == s for r in report.results) for s in _STATUSES}
    lines += ["", ", ".join(f"{n} {s}" for s, n in counts.items())]
    if not strict:
        unchecked = [o.op for o in report.ops if o.fails(True) and not o.fails(False)]
        if unchecked:
            lines.append(
                f"warning: declared but unchecked: {', '.join(unchecked)} "
                "(a failure under --strict)"
            )
    return "\n".join(lines)


def print_report(
    report: ConformanceReport,
    *,
    strict: bool = True,
    everything: bool = False,
    file: TextIO | None = None,
) -> None:
    """Print :func:`format_report` to ``file`` (standard output by default)."""
    print(format_report(report, strict=strict, everything=everything), file=file or sys.stdout)

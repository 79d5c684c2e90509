"""Plain text and JSON for reports: one-line cells, aligned tables, JSON-safe numbers.

The library's reports (:class:`offload.SweepReport`, :class:`offload.PerNodeDiff`) and the
command line that prints them share these, so a table or a JSON document reads the same
whichever of the two produced it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["one_line", "format_table", "json_safe"]


def one_line(text: str) -> str:
    """``text`` for one line of output: its newlines, carriage returns and tabs escaped too,
    so that a name from a model cannot start a line of its own (a forged summary line)."""
    return text.replace("\t", "\\t").replace("\r", "\\r").replace("\n", "\\n")


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], indent: str = "") -> str:
    """A plain left-aligned text table (numbers right-aligned); a cell is one line, whatever
    a model's names hold."""
    cells = [[str(h) for h in headers]] + [
        ["" if c is None else one_line(str(c)) for c in r] for r in rows
    ]
    numeric = [
        all(_is_number(row[i]) for row in cells[1:] if row[i]) and len(cells) > 1
        for i in range(len(headers))
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for k, row in enumerate(cells):
        parts = [
            c.rjust(w) if numeric[i] and k else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths))
        ]
        lines.append(indent + "  ".join(parts).rstrip())
        if k == 0:
            lines.append(indent + "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _is_number(text: str) -> bool:
    try:
        float(text.rstrip("x%"))
    except ValueError:
        return False
    return True


def json_safe(value: Any) -> Any:
    """NaN and infinities become null: JSON has no spelling for them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value

"""Plain text and JSON for reports: one-line cells, aligned tables, JSON-safe numbers.

The library's reports (:class:`offload.SweepReport`, :class:`offload.PerNodeDiff`) and the
command line that prints them share these, so a table or a JSON document reads the same
whichever of the two produced it.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "TEXT_WIDTH",
    "fit_table",
    "format_error",
    "format_table",
    "json_default",
    "json_safe",
    "node_ranges",
    "one_line",
    "wrap_text",
]

# Text reports fit a terminal of this many columns: a longer line wraps in the terminal and
# breaks the indentation that groups a report's lines.
TEXT_WIDTH = 100


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


def json_default(value: Any) -> Any:
    """What ``json.dumps(default=...)`` writes for a value JSON has no type for: numpy
    scalars and arrays as numbers and lists, sets and tuples as lists, anything else (a
    path, an enum member) as its text."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def json_safe(value: Any) -> Any:
    """NaN and infinities become null: JSON has no spelling for them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def format_error(error: dict[str, float] | None) -> str:
    """A candidate's measured error (worst over auto's input sets) as tables show it: relative
    and steps, and classifier rows whose top-1 changed; the reference itself (no figure)
    blank."""
    if not error:
        return "" if error is None else "0"
    parts = []
    if "relative" in error:
        parts.append(f"{error['relative']:.1e} rel")
    if "steps" in error:
        parts.append(f"{error['steps']:g} steps")
    if error.get("top1_changes"):
        parts.append(f"top-1 changed x{error['top1_changes']:g}")
    return ", ".join(parts) or "0"


def wrap_text(text: str, indent: str = "", hanging: str = "    ", width: int = TEXT_WIDTH) -> str:
    """``text`` in lines of at most ``width`` characters: the first after ``indent``, the
    others after ``indent + hanging``. A word longer than a line (a path) stays whole, so it
    can still be copied."""
    return textwrap.fill(
        text,
        width=width,
        initial_indent=indent,
        subsequent_indent=indent + hanging,
        break_long_words=False,
        break_on_hyphens=False,  # "uniform(-1,1)", "litert+openvino": not break points
    )


def fit_table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    indent: str = "",
    width: int = TEXT_WIDTH,
) -> str:
    """:func:`format_table`, kept a table: where a row would be wider than ``width``, the
    first column's cells (long names) become ``[1]``, ``[2]``... and are listed under it
    (wrapped: textwrap turns a name's newlines into spaces, so none starts a line of its own)."""
    rows = [list(r) for r in rows]
    text = format_table(headers, rows, indent)
    if not rows or max(len(line) for line in text.splitlines()) <= width:
        return text
    keyed = [[f"[{i}]", *row[1:]] for i, row in enumerate(rows, 1)]
    legend = [wrap_text(f"[{i}] {row[0]}", indent, "    ", width) for i, row in enumerate(rows, 1)]
    return "\n".join([format_table(headers, keyed, indent), *legend])


def node_ranges(nodes: Sequence[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``0-2, 5, 7-8``."""
    out: list[str] = []
    items = sorted(nodes)
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        out.append(str(items[i]) if i == j else f"{items[i]}-{items[j]}")
        i = j + 1
    return ", ".join(out)

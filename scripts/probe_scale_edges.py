"""Record what LiteRT does with quantization scales at the edges, op by op.

    .venv/bin/python scripts/probe_scale_edges.py    # rewrites the record

The record is ``tests/fixtures/litert_scale_edges.json``; the cases are
``tests/_scale_edges.py``'s one-op models (ADD, SUB, MUL, SQUARED_DIFFERENCE, MEAN, SUM,
HARD_SWISH, CONCATENATION; int8 and int16; input/output scale ratios from 1e-30 to 1e30,
placed four ways). LiteRT's builtin kernels (``BUILTIN_WITHOUT_DEFAULT_DELEGATES``, the
oracle) and its default resolver (XNNPACK) each allocate and invoke every case in child
processes: ``ok`` with the output values, ``refused`` with LiteRT's message, or ``crash`` where
LiteRT killed the process. ``saturated`` says whether every output value is an end of its type.
``tests/test_scale_edges.py`` holds offload to this record on every engine, so a LiteRT
upgrade that moves an edge shows up as a test failure after this script is run again.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests._scale_edges import cases, run_cases  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "litert_scale_edges.json"
ENGINES = ("litert_builtin", "litert_xnnpack")


def _entry(result: dict, dtype: str) -> dict:
    entry = {"outcome": result["outcome"]}
    if result["outcome"] == "ok":
        values = result["values"]
        ends = (-128, 127) if dtype == "int8" else (-32768, 32767)
        entry["values"] = values
        entry["saturated"] = all(v in ends for v in values)
    elif result["outcome"] == "refused":
        entry["message"] = result["message"].splitlines()[0][:200]
    return entry


def main() -> int:
    work = [(case, engine) for case in cases() for engine in ENGINES]
    results = run_cases(work, timeout=3600)
    record: dict[str, dict[str, dict]] = {}
    for (case, engine), result in zip(work, results):
        record.setdefault(case.key, {})[engine] = _entry(result, case.dtype)
    for entry in record.values():
        # XNNPACK's values only as their distance from the builtin kernels' (the oracle's).
        builtin, xnnpack = entry["litert_builtin"], entry["litert_xnnpack"]
        if "values" in xnnpack and "values" in builtin:
            pairs = zip(xnnpack.pop("values"), builtin["values"])
            xnnpack["max_diff"] = max(abs(a - b) for a, b in pairs)
        xnnpack.pop("values", None)
    import ai_edge_litert

    version = getattr(ai_edge_litert, "__version__", "unknown")
    # One case a line: the file stays readable and its diffs small.
    lines = [f"  {json.dumps(key)}: {json.dumps(entry)}" for key, entry in record.items()]
    OUT.write_text(
        f'{{"litert": {json.dumps(version)},\n "cases": {{\n' + ",\n".join(lines) + "\n }\n}\n"
    )
    counts: dict[str, int] = {}
    for entry in record.values():
        word = entry["litert_builtin"]["outcome"]
        counts[word] = counts.get(word, 0) + 1
    print(f"{len(record)} cases: {counts}; written to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

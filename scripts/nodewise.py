"""Audit offload's CPU kernels against LiteRT node by node on a real model.

A thin wrapper over ``offload diff --per-node`` (offload.diff_per_node): LiteRT runs the
model once with every intermediate kept, and each node's CPU kernel is re-run on LiteRT's own
inputs for that node, for every node (not only divergent ones), so a disagreement is pinned to
one node instead of one model. Integers pass within 1 step, floats within 1e-5 relative error,
as this script always allowed; ``offload diff --per-node`` is stricter by default.

    python scripts/nodewise.py MODEL.tflite [--seed N] [--only OP[,OP]] [--input KIND]
"""

from __future__ import annotations

import argparse
import sys

from offload import NodeDiff, diff_per_node
from offload.tools._common import INPUT_KINDS


def describe(row: NodeDiff) -> tuple[bool, str]:
    """(passed, what) for one row's re-run on LiteRT's inputs."""
    local = row.local
    if local is None:
        return row.locality != "local", row.note or row.status
    if local.note:
        return not local.exceeds, local.note
    if local.kind == "float":
        return not local.exceeds, f"rel err {local.relative_error:.2e}"
    exact = "-" if local.equal is None else f"{local.equal:.4f}"
    return not local.exceeds, f"max diff {local.max_error:g}, exact {exact}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="", help="comma-separated op names to print")
    parser.add_argument("--input", choices=tuple(INPUT_KINDS), default="normal")
    args = parser.parse_args(argv)
    only = {s.strip().upper() for s in args.only.split(",") if s.strip()}

    result = diff_per_node(
        args.model,
        "litert",
        "cpu",
        seed=args.seed,
        input_kind=args.input,
        tolerance_steps=1,
        check_locality="all",
    )
    failures = 0
    for row in result.rows:
        if only and row.op.split(" v")[0] not in only:
            continue
        passed, what = describe(row)
        failures += not passed
        print(
            f"{'ok  ' if passed else 'FAIL'} {row.op} (node {row.node}) tensor {row.tensor}: {what}"
        )
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

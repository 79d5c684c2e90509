"""What delegate isolation costs: offload with the litert delegate, isolated and not, against
LiteRT, per model, interleaved in one process.

Isolation is what the interpreter does around a delegate partition so that a kernel cannot
reach the user's data (issue 25): each input handed over as a read-only view, each output held
to its tensor's dtype and shape as a base ndarray (and copied, unless the kernel declares
``fresh_outputs``, as the litert kernel does). The ``bypassed`` column is the same interpreter
with the read-only views patched out, the one part a benchmark can remove; the output checks
stay in both. Columns, each timed as a user runs a model (set_tensor, invoke, get_tensor), at
one thread, a new order each round, medians:

- ``litert``: LiteRT directly (XNNPACK);
- ``isolated``: offload with the litert delegate (XNNPACK), as shipped;
- ``bypassed``: the same, inputs handed over without read-only views.

    python benchmarks/isolation_cost.py [--budget 8] [--runs 200] [--models NAME ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import engines_vs_litert as bench  # noqa: E402

import offload  # noqa: E402
import offload._executor  # noqa: E402  (the runner that hands inputs over; patched below)


def _unguarded_runner(kernel: Any, variable: Sequence[bool]) -> Callable[..., Any]:
    def run(*inputs: np.ndarray) -> Any:
        return kernel.invoke(list(inputs))

    return run


def _litert_delegated(path: Path) -> offload.Interpreter:
    return offload.Interpreter(
        model_path=path,
        experimental_delegates=[offload.load_delegate("litert", {"num_threads": 1})],
        allow_cpu_fallback=False,
    )


def measure(path: Path, budget: float, runs: int) -> dict[str, Any]:
    probe = bench.litert.Interpreter(model_path=str(path))
    arrays = bench.make_inputs(probe.get_input_details())
    direct = bench.litert.Interpreter(model_path=str(path), num_threads=1)
    isolated = _litert_delegated(path)
    with mock.patch.object(offload._executor, "_partition_runner", _unguarded_runner):
        bypassed = _litert_delegated(path)
        bypassed.allocate_tensors()  # the runner is bound here, when the steps are compiled
    cols = []
    for key, interp in (("litert", direct), ("isolated", isolated), ("bypassed", bypassed)):
        interp.allocate_tensors()
        cols.append(bench.Column(key, 1, interp, arrays, runs))
    rounds = bench.timed_rounds(cols, budget, runs, pause=0.0)
    med = {c.key: statistics.median(c.times) * 1000 for c in cols}
    same = (
        all(np.array_equal(a, b) for a, b in zip(cols[1].result, cols[2].result))
        and bench.max_error(cols[1].result, cols[0].result) == 0.0
    )
    return {
        "model": path.stem,
        "rounds": rounds,
        "litert_ms": med["litert"],
        "isolated_ms": med["isolated"],
        "bypassed_ms": med["bypassed"],
        "isolated_vs_litert": med["isolated"] / med["litert"],
        "bypassed_vs_litert": med["bypassed"] / med["litert"],
        "isolated_vs_bypassed": med["isolated"] / med["bypassed"],
        "outputs_identical": same,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=8.0, help="seconds of rounds per model")
    parser.add_argument("--runs", type=int, default=200, help="most rounds per model")
    parser.add_argument("--models", nargs="*", default=None, help="model file stems")
    args = parser.parse_args(argv)
    chosen = [
        p
        for group, p in bench.models()
        if (args.models and p.stem in args.models) or (not args.models and group == "public")
    ]
    print(f"{bench.machine()}; LiteRT {bench.litert_version()}; 1 thread, medians\n")
    print(
        "| model | LiteRT ms | isolated ms | bypassed ms | isolated / LiteRT "
        "| bypassed / LiteRT | isolated / bypassed | outputs identical |"
    )
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for path in chosen:
        row = measure(path, args.budget, args.runs)
        rows.append(row)
        print(
            f"| {row['model']} | {row['litert_ms']:.3f} | {row['isolated_ms']:.3f} | "
            f"{row['bypassed_ms']:.3f} | {row['isolated_vs_litert']:.3f} | "
            f"{row['bypassed_vs_litert']:.3f} | {row['isolated_vs_bypassed']:.3f} | "
            f"{'yes' if row['outputs_identical'] else 'NO'} |",
            flush=True,
        )
    cost = [r["isolated_vs_bypassed"] for r in rows]
    print(
        f"\nisolated / bypassed: median {statistics.median(cost):.3f}, worst {max(cost):.3f}; "
        f"isolated / LiteRT: median {statistics.median(r['isolated_vs_litert'] for r in rows):.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

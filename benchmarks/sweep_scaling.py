"""How `offload sweep` scales with workers, locally and on Ray (issue 24).

Measures, on this machine, one model (MobileNetV3-Small int8 fixture, CPU reference, a few
ms an item) over seeded inputs:

- the per-item cost in one process (``--workers 1``, serial, no pool);
- throughput with 1 and 2 workers, local process pool and Ray Data actors (a local Ray of
  this machine's CPUs, started once and shared by the Ray runs), end to end and in steady
  state (from the first shard's arrival to the last, so start-up is apart);
- Ray's overhead per task: a near-free model (MEAN + FULLY_CONNECTED on 8x8 inputs) in
  batches of one item, per batch, minus that item's own time;

then projects throughput on N cores and on M machines from those figures:
``items/s = workers x efficiency / (item cost + overhead per task / batch size)``, with the
2-worker efficiency measured here.

    python benchmarks/sweep_scaling.py [--items 400] [--shard 20]
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import offload

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
MODEL = FIXTURES / "mobilenet_v3_small_int8.tflite"


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def timed(**kwargs: Any) -> dict[str, float]:
    """One sweep: wall time, and steady-state time from the first shard to the last."""
    arrivals: list[float] = []
    t0 = time.perf_counter()
    report = offload.sweep(on_shard=lambda _: arrivals.append(time.perf_counter()), **kwargs)
    wall = time.perf_counter() - t0
    rows = [r for r in report.rows if r.status == "ok"]
    assert rows and all(r.failed_items == 0 for r in rows), [r.reason for r in report.rows]
    items = report.num_items * len(rows)  # item x configuration runs
    first = report.shard_size * len(rows)  # the first shard's items arrive at time zero
    steady = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else float("nan")
    return {
        "wall_s": wall,
        "items_per_s": items / wall,
        "steady_items_per_s": (items - first) / steady if steady > 0 else float("nan"),
        "startup_s": arrivals[0] - t0 if arrivals else float("nan"),
        "item_ms": sum(r.mean_ms or 0.0 for r in rows),
    }


def tiny_model(folder: Path) -> Path:
    import sys

    sys.path.insert(0, str(FIXTURES.parent.parent))
    from tests._sweep_models import colour_classifier

    return colour_classifier(folder / "tiny.tflite")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=400)
    parser.add_argument("--shard", type=int, default=20)
    args = parser.parse_args()
    common = {"configs": ["cpu"], "reference": "cpu", "random": args.items}
    cores = os.cpu_count() or 1
    print(f"CPU: {_cpu()}, {cores} cores; model {MODEL.name}; {args.items} items")

    serial = timed(models=MODEL, workers=1, shard_size=args.shard, **common)
    cost = serial["wall_s"] / args.items
    print(
        f"serial in-process: {serial['wall_s']:.2f} s, {1e3 * cost:.2f} ms an item "
        f"(invoke alone {serial['item_ms']:.2f} ms)"
    )

    results: dict[tuple[str, int], dict[str, float]] = {}
    for workers in (1, 2):
        results[("local", workers)] = timed(
            models=MODEL, workers=workers, shard_size=args.shard, **common
        )
    import ray

    ray.init(num_cpus=cores, include_dashboard=False, logging_level=logging.WARNING)
    try:
        for workers in (1, 2):
            results[("ray", workers)] = timed(
                models=MODEL, engine="ray", workers=workers, shard_size=args.shard, **common
            )
        with tempfile.TemporaryDirectory() as tmp:
            tiny = tiny_model(Path(tmp))
            small = {**common, "random": 200}
            per_item = timed(models=tiny, workers=1, shard_size=200, **small)
            per_task = timed(models=tiny, engine="ray", workers=1, shard_size=1, **small)
    finally:
        ray.shutdown()
    overhead = 1.0 / per_task["steady_items_per_s"] - 1.0 / per_item["items_per_s"]

    print()
    print("| engine | workers | wall s | start-up s | items/s (end to end) | items/s (steady) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for (engine, workers), r in results.items():
        print(
            f"| {engine} | {workers} | {r['wall_s']:.2f} | {r['startup_s']:.2f} | "
            f"{r['items_per_s']:.1f} | {r['steady_items_per_s']:.1f} |"
        )
    print()
    print(f"Ray overhead per task (batch of one, tiny model): {1e3 * overhead:.2f} ms")
    rate: dict[str, float] = {}
    efficiency: dict[str, float] = {}
    for engine in ("local", "ray"):
        rate[engine] = results[(engine, 1)]["steady_items_per_s"]
        two = results[(engine, 2)]["steady_items_per_s"]
        efficiency[engine] = two / (2 * rate[engine])
        print(
            f"{engine}: one worker {1e3 / rate[engine]:.2f} ms an item, 2-worker speed-up "
            f"{two / rate[engine]:.2f}x, efficiency {efficiency[engine]:.2f}"
        )
    print()
    print(
        "Projection, steady state: workers x efficiency x one worker's rate, the efficiency "
        "measured here with 2 workers; start-up (once per sweep) is outside these rates, Ray's "
        f"{1e3 * overhead:.1f} ms per batch ({1e3 * overhead / args.shard:.2f} ms an item in "
        f"batches of {args.shard}) inside its rate."
    )
    print("| cores | local, one machine | Ray, one machine | Ray, 8 machines of that many cores |")
    print("| --- | --- | --- | --- |")
    for n in (2, 8, 16, 64):
        local = n * efficiency["local"] * rate["local"]
        on_ray = n * efficiency["ray"] * rate["ray"]
        print(f"| {n} | {local:.0f} | {on_ray:.0f} | {8 * on_ray:.0f} |")


if __name__ == "__main__":  # the local engine's workers are spawned: they import this file
    main()

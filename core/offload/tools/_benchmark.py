"""``offload benchmark --graph MODEL``: LiteRT's benchmark_model, for offload's Interpreter.

Timings: model load, init (interpreter creation + delegate application + allocate_tensors),
first inference, warm-up and steady-state latency. Memory: the peak RSS rise during init and
during inference (``/proc/self/status`` VmHWM, reset through ``/proc/self/clear_refs``; else
``getrusage``), plus the bytes held by tensor buffers and by kernels that report ``nbytes``.
``--compare cpu,dummy`` runs several configurations in one process, round-robin.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from offload._interpreter import Interpreter
from offload._loader import load_model
from offload._plugins import load_delegate
from offload.errors import DelegateUnavailableError
from offload.tools._common import (
    EXIT_OK,
    UsageError,
    add_delegate_args,
    add_json_arg,
    fmt_g,
    format_table,
    interpreter_delegates,
    latency_stats,
    print_json,
    progress,
    random_inputs,
    requested_delegates,
    require_extra,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "benchmark",
        help="measure load, init and inference time and memory (LiteRT's benchmark_model)",
        description="Time and measure one model: load, init, first inference, warm-up, steady "
        "state latency (avg/std/p50/p90/min/max, microseconds) and memory.",
    )
    p.add_argument("--graph", required=True, metavar="MODEL", help="path to a .tflite model")
    p.add_argument("--num_threads", type=int, default=None, help="passed to the Interpreter")
    p.add_argument("--warmup_runs", type=int, default=1, help="warm-up invokes (default 1)")
    p.add_argument(
        "--warmup_min_secs",
        type=float,
        default=0.0,
        help="keep warming up for at least this long (default 0)",
    )
    p.add_argument("--num_runs", type=int, default=50, help="timed invokes, at least (default 50)")
    p.add_argument(
        "--min_secs",
        type=float,
        default=1.0,
        help="keep running past --num_runs until this many seconds passed (default 1)",
    )
    p.add_argument(
        "--max_secs",
        type=float,
        default=150.0,
        help="stop once this many seconds passed, even before --num_runs (default 150)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument(
        "--enable_op_profiling",
        action="store_true",
        help="time every op / partition and print the table",
    )
    p.add_argument("--plot", metavar="PNG", help="draw per-op time to a PNG (needs offload[tools])")
    p.add_argument(
        "--compare",
        metavar="CONFIGS",
        help="comma-separated configurations run round-robin in one process, e.g. "
        "cpu,gpu_opencl,dummy ('cpu' = no delegate)",
    )
    add_delegate_args(p)
    add_json_arg(p)
    p.set_defaults(func=run)


# -- memory -------------------------------------------------------------------------------

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kb(field_name: str) -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


class MemoryProbe:
    """Current and peak RSS in bytes; the peak can be reset on Linux."""

    def __init__(self) -> None:
        self.resettable = False
        self.source = "getrusage"
        if _status_kb("VmHWM") is not None:
            self.source = "/proc/self/status"
            try:
                _CLEAR_REFS.write_text("5")
                self.resettable = True
            except OSError:
                pass

    def rss(self) -> int:
        kb = _status_kb("VmRSS")
        return kb * 1024 if kb is not None else self._maxrss()

    def peak(self) -> int:
        kb = _status_kb("VmHWM")
        return kb * 1024 if kb is not None else self._maxrss()

    def reset_peak(self) -> None:
        if self.resettable:
            try:
                _CLEAR_REFS.write_text("5")
            except OSError:
                self.resettable = False

    @staticmethod
    def _maxrss() -> int:
        import resource

        value = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return value if sys.platform == "darwin" else value * 1024

    def start(self) -> int:
        """Reset the peak and return the RSS to measure the rise from."""
        self.reset_peak()
        return self.rss() if self.resettable else self.peak()

    def rise(self, start: int) -> int:
        return max(0, self.peak() - start)


def tensor_bytes(interpreter: Interpreter) -> dict[str, int]:
    """Bytes held by the interpreter's tensor buffers, its arena of intermediates, and by
    kernels that report ``nbytes``."""
    ex = interpreter._executor
    seen: set[int] = set()
    total = constant = 0
    tensors = ex.subgraph.tensors
    for i, buf in enumerate(ex.buffers):
        if buf is None or id(buf) in seen:
            continue
        seen.add(id(buf))
        total += buf.nbytes
        if tensors[i].is_constant:
            constant += buf.nbytes
    delegate = sum(int(getattr(k, "nbytes", 0) or 0) for k in ex.delegate_kernels.values())
    cpu = sum(int(getattr(k, "nbytes", 0) or 0) for k in ex.cpu_kernels.values())
    return {
        "tensors": total,
        "constant_tensors": constant,
        "arena": 0 if ex.arena is None else int(ex.arena.nbytes),
        "delegate_buffers": delegate,
        "cpu_kernel_buffers": cpu,
    }


# -- one configuration --------------------------------------------------------------------


@dataclass
class Config:
    name: str
    delegates: Any  # what Interpreter(delegates=...) gets
    interpreter: Interpreter | None = None
    unavailable: str = ""
    init_s: float = 0.0
    first_s: float = 0.0
    warmup: list[float] = field(default_factory=list)
    runs: list[float] = field(default_factory=list)
    memory: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        it = self.interpreter
        out: dict[str, Any] = {"name": self.name}
        if it is None:
            out.update(available=False, reason=self.unavailable)
            return out
        plan = it.plan()
        out.update(
            available=True,
            delegates={
                name: {
                    "nodes": len(plan.nodes_of(name)),
                    "partitions": sum(p.delegate == name for p in plan.partitions),
                }
                for name in plan.delegates
            },
            cpu_nodes=len(plan.cpu_nodes()),
            init_ms=self.init_s * 1e3,
            first_inference_us=self.first_s * 1e6,
            warmup=latency_stats(self.warmup),
            inference=latency_stats(self.runs),
            memory=self.memory,
        )
        return out


def _init(
    config: Config,
    path: str,
    args: argparse.Namespace,
    profile: bool,
    probe: MemoryProbe,
    inputs: list[np.ndarray] | None,
    rng: np.random.Generator,
) -> list[np.ndarray]:
    start_rss = probe.start()
    t0 = time.perf_counter()
    it = Interpreter(
        model_path=path, delegates=config.delegates, num_threads=args.num_threads, profile=profile
    )
    it.allocate_tensors()
    config.init_s = time.perf_counter() - t0
    config.memory["init_peak_rss_rise"] = probe.rise(start_rss)
    config.interpreter = it
    details = it.get_input_details()
    if inputs is None:
        inputs = random_inputs(details, rng)
    for d, value in zip(details, inputs):
        it.set_tensor(d["index"], value)
    return inputs


def _invoke(it: Interpreter) -> float:
    t0 = time.perf_counter()
    it.invoke()
    return time.perf_counter() - t0


def _timed_loop(configs: Sequence[Config], args: argparse.Namespace, show: bool) -> None:
    """Warm up, then invoke each configuration in turn until --num_runs and --min_secs are met."""
    live = [c for c in configs if c.interpreter is not None]
    probe = MemoryProbe()
    for c in live:
        start = probe.start()
        c.first_s = _invoke(c.interpreter)  # type: ignore[union-attr]
        c.memory["first_inference_peak_rss_rise"] = probe.rise(start)
    for c in live:
        t_end = time.perf_counter() + args.warmup_min_secs
        while len(c.warmup) < args.warmup_runs or time.perf_counter() < t_end:
            c.warmup.append(_invoke(c.interpreter))  # type: ignore[arg-type]
    start_rss = probe.start()
    t_start = time.perf_counter()

    def rounds() -> Any:
        k = 0
        while True:
            elapsed = time.perf_counter() - t_start
            if k >= args.num_runs and elapsed >= args.min_secs:
                return
            if elapsed >= args.max_secs and k > 0:
                return
            yield k
            k += 1

    for _ in progress(rounds(), total=args.num_runs, desc="benchmark", enabled=show):
        for c in live:
            c.runs.append(_invoke(c.interpreter))  # type: ignore[arg-type]
    rise = probe.rise(start_rss)
    for c in live:
        c.memory["inference_peak_rss_rise"] = rise
        c.memory.update(tensor_bytes(c.interpreter))  # type: ignore[arg-type]
    for c in live:
        c.memory["memory_source"] = probe.source  # type: ignore[assignment]


def _mb(n: int) -> str:
    """Bytes for people: ``512 B``, ``12.3 KiB``, ``4.56 MiB``."""
    if n < 1024:
        return f"{n} B"
    if n < 2**20:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 2**20:.2f} MiB"


# -- the command --------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    path = args.graph
    if not Path(path).is_file():
        raise UsageError(f"model {path!r}: no such file")
    if args.num_runs < 1 or args.warmup_runs < 0:
        raise UsageError("--num_runs must be >= 1 and --warmup_runs >= 0")
    if args.plot:
        require_extra("matplotlib", "--plot")
    profile = bool(args.plot or args.enable_op_profiling)
    rng = np.random.default_rng(args.seed)
    probe = MemoryProbe()
    t0 = time.perf_counter()
    model = load_model(model_path=path)
    load_s = time.perf_counter() - t0
    del model
    if args.compare:
        configs = _compare_configs(args)
    else:
        chosen = interpreter_delegates(args)
        label = chosen if isinstance(chosen, str) else "+".join(d.name for d in chosen)
        configs = [Config(label or "cpu", chosen)]
    inputs = None
    for c in configs:
        if c.unavailable:
            continue
        inputs = _init(c, path, args, profile, probe, inputs, rng)
    show = not args.json
    _timed_loop(configs, args, show)
    result: dict[str, Any] = {
        "model": path,
        "model_size_bytes": os.path.getsize(path),
        "model_load_ms": load_s * 1e3,
        "num_threads": args.num_threads,
        "configs": [c.summary() for c in configs],
    }
    if args.compare:
        _add_ratios(result)
    main = configs[0]
    if profile and main.interpreter is not None:
        result["op_profile"] = _op_profile(main)
    if args.plot and main.interpreter is not None:
        _plot(result["op_profile"], args.plot, path)
        result["plot"] = args.plot
    if args.json:
        print_json(result)
    elif args.compare:
        _print_compare(result)
    else:
        _print_single(result)
    return EXIT_OK


def _compare_configs(args: argparse.Namespace) -> list[Config]:
    names = [n.strip() for n in args.compare.split(",") if n.strip()]
    if not names:
        raise UsageError("--compare expects comma-separated configurations, e.g. cpu,dummy")
    if "cpu" in names:
        names.remove("cpu")
    names.insert(0, "cpu")  # the CPU reference is always the first column and the baseline
    options = dict(requested_delegates(args))
    configs = []
    for name in dict.fromkeys(names):
        if name == "cpu":
            configs.append(Config("cpu", None))
            continue
        try:
            configs.append(Config(name, [load_delegate(name, options.get(name, {}))]))
        except DelegateUnavailableError as exc:
            configs.append(Config(name, None, unavailable=str(exc)))
    return configs


def _add_ratios(result: dict[str, Any]) -> None:
    base = result["configs"][0]
    base_avg = base["inference"]["avg"]
    for c in result["configs"]:
        if c.get("available"):
            avg = c["inference"]["avg"]
            c["latency_ratio_vs_cpu"] = avg / base_avg if base_avg else None
            c["speedup_vs_cpu"] = base_avg / avg if avg else None


def _op_profile(config: Config) -> list[dict[str, Any]]:
    it = config.interpreter
    assert it is not None
    invokes = 1 + len(config.warmup) + len(config.runs)
    rows = []
    total = sum(r["total_ms"] for r in it.profile_report()) or 1.0
    for r in it.profile_report():
        rows.append(
            {
                **r,
                "ms_per_invoke": r["total_ms"] / invokes,
                "percent": 100.0 * r["total_ms"] / total,
            }
        )
    return rows


def _plot(rows: list[dict[str, Any]], out: str, title: str) -> None:
    matplotlib = require_extra("matplotlib", "--plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = rows[:30]
    names = [r["name"] for r in rows][::-1]
    values = [r["ms_per_invoke"] for r in rows][::-1]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(rows) + 1.5))
    ax.barh(names, values, color="#3b78c2")
    ax.set_xlabel("ms per invoke")
    ax.set_title(f"per-op time: {Path(title).name}")
    for y, v in enumerate(values):
        ax.text(v, y, f" {v:.3g}", va="center", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def _print_single(result: dict[str, Any]) -> None:
    c = result["configs"][0]
    inf, warm, mem = c["inference"], c["warmup"], c["memory"]
    print(f"Graph: [{result['model']}] ({result['model_size_bytes']} bytes)")
    used = (
        ", ".join(
            f"{n}: {d['nodes']} nodes in {d['partitions']} partition(s)"
            for n, d in c["delegates"].items()
        )
        or "none"
    )
    print(f"Delegates: {used}; CPU reference: {c['cpu_nodes']} nodes")
    print(f"Loaded model in {fmt_g(result['model_load_ms'])} ms")
    print(f"Initialized in {fmt_g(c['init_ms'])} ms (interpreter + delegates + allocate_tensors)")
    print(
        f"Inference timings in us: Init: {fmt_g(c['init_ms'] * 1e3)}, "
        f"First inference: {fmt_g(c['first_inference_us'])}, "
        f"Warmup (avg): {fmt_g(warm['avg'])}, Inference (avg): {fmt_g(inf['avg'])}"
    )
    print(
        f"Inference ({inf['count']} runs, us): avg={fmt_g(inf['avg'])} std={fmt_g(inf['std'])} "
        f"p50={fmt_g(inf['p50'])} p90={fmt_g(inf['p90'])} min={fmt_g(inf['min'])} "
        f"max={fmt_g(inf['max'])}"
    )
    print(
        f"Memory (peak RSS rise, {mem['memory_source']}): init={_mb(mem['init_peak_rss_rise'])} "
        f"first inference={_mb(mem['first_inference_peak_rss_rise'])} "
        f"inference={_mb(mem['inference_peak_rss_rise'])}"
    )
    print(
        f"Memory held: tensors={_mb(mem['tensors'])} (constants {_mb(mem['constant_tensors'])}) "
        f"arena={_mb(mem['arena'])} delegate buffers={_mb(mem['delegate_buffers'])}"
    )
    if "op_profile" in result:
        print("\nPer-op profile (ms per invoke)")
        rows = [
            [r["name"], r["steps"], f"{r['ms_per_invoke']:.4f}", f"{r['percent']:.1f}%"]
            for r in result["op_profile"]
        ]
        print(format_table(["op / partition", "nodes", "ms", "share"], rows, "  "))
    if "plot" in result:
        print(f"\nwrote {result['plot']}")


def _print_compare(result: dict[str, Any]) -> None:
    print(f"Graph: [{result['model']}]; configurations run round-robin in one process")
    rows = []
    for c in result["configs"]:
        if not c.get("available"):
            rows.append([c["name"], "unavailable", "", "", "", "", "", "", "", ""])
            continue
        inf = c["inference"]
        delegated = sum(d["nodes"] for d in c["delegates"].values())
        rows.append(
            [
                c["name"],
                f"{delegated}/{delegated + c['cpu_nodes']}",
                f"{c['init_ms']:.2f}",
                fmt_g(inf["avg"]),
                fmt_g(inf["std"]),
                fmt_g(inf["p50"]),
                fmt_g(inf["p90"]),
                fmt_g(inf["min"]),
                f"{c['latency_ratio_vs_cpu']:.3f}",
                f"{c['speedup_vs_cpu']:.2f}x",
            ]
        )
    print(
        format_table(
            [
                "config",
                "delegated",
                "init ms",
                "avg us",
                "std us",
                "p50 us",
                "p90 us",
                "min us",
                "latency/cpu",
                "speedup",
            ],
            rows,
            "  ",
        )
    )
    for c in result["configs"]:
        if not c.get("available"):
            print(f"  {c['name']}: {c['reason']}")

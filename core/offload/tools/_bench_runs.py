"""The runs of ``offload benchmark``: configurations, their init, timed invokes, profiles.

Configurations are run round-robin in one process, so a slow phase of the machine (another
process, thermal throttling) falls on every configuration alike.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from offload._interpreter import Interpreter
from offload._plugins import load_delegate
from offload.errors import DelegateUnavailableError
from offload.tools._bench_memory import MemoryProbe
from offload.tools._common import (
    UsageError,
    interpreter_options,
    latency_stats,
    progress,
    random_inputs,
    requested_delegates,
)

__all__ = ["Config", "add_ratios", "compare_configs", "init_config", "op_profile", "timed_loop"]


@dataclass
class Config:
    """One configuration of a run (``cpu``, a delegate): its interpreter and its figures."""

    name: str
    delegates: Any  # what Interpreter(delegates=...) gets
    interpreter: Interpreter | None = None
    unavailable: str = ""
    init_s: float = 0.0
    first_s: float = 0.0
    warmup: list[float] = field(default_factory=list)
    runs: list[float] = field(default_factory=list)
    memory: dict[str, int] = field(default_factory=dict)
    # ``--profile``: what _bench_profile measured (device time per kernel family), else None.
    device_profile: dict[str, Any] | None = None
    # ``--roofline``: the step profile before the timed runs (each part's time is its rise
    # over them), and the roofline _bench_roofline made of them.
    profile_before: list[dict[str, Any]] | None = None
    roofline: dict[str, Any] | None = None

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
        if self.device_profile is not None:
            out["device_profile"] = self.device_profile
        if self.roofline is not None:
            out["roofline"] = self.roofline
        report = it.delegation_report()
        out["default"] = report["default"]
        auto = report.get("auto")
        if auto is not None:
            # The time spent choosing is part of init_ms; said apart, as the choice is remembered.
            out["auto"] = {
                key: auto.get(key)
                for key in (
                    "mode",
                    "chosen",
                    "reason",
                    "from_cache",
                    "choosing_s",
                    "measure_s",
                    "prepare_s",
                    "budget_s",
                    "gate",
                )
            }
            out["auto"]["candidates"] = [
                {key: row[key] for key in ("label", "status", "reason", "error") if key in row}
                for row in auto.get("candidates") or []
            ]
        return out


def init_config(
    config: Config,
    path: str,
    args: argparse.Namespace,
    profile: bool,
    probe: MemoryProbe,
    inputs: list[np.ndarray] | None,
    rng: np.random.Generator,
) -> list[np.ndarray]:
    options = interpreter_options(args)
    if config.delegates == "auto" and inputs is not None:
        options["auto_inputs"] = [inputs]  # auto's check covers the inputs timed here
    start_rss = probe.start()
    t0 = time.perf_counter()
    it = Interpreter(
        model_path=path,
        delegates=config.delegates,
        num_threads=args.num_threads,
        profile=profile,
        **options,
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


def timed_loop(configs: Sequence[Config], args: argparse.Namespace, show: bool) -> None:
    """Warm up, then invoke each configuration in turn until --num_runs and --min_secs are met."""
    live = [c for c in configs if c.interpreter is not None]
    probe = MemoryProbe()
    for c in live:
        start = probe.start()
        c.first_s = _invoke(c.interpreter)  # type: ignore[arg-type]  # live: not None
        c.memory["first_inference_peak_rss_rise"] = probe.rise(start)
    for c in live:
        t_end = time.perf_counter() + args.warmup_min_secs
        while len(c.warmup) < args.warmup_runs or time.perf_counter() < t_end:
            c.warmup.append(_invoke(c.interpreter))  # type: ignore[arg-type]
    if getattr(args, "roofline", False):
        for c in live:
            c.profile_before = c.interpreter.profile_report()  # type: ignore[union-attr]
    start_rss = probe.start()
    t_start = time.perf_counter()

    def rounds() -> Iterator[int]:
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
        c.memory.update(c.interpreter.memory_report())  # type: ignore[union-attr]
    for c in live:
        c.memory["memory_source"] = probe.source  # type: ignore[assignment]


def compare_configs(args: argparse.Namespace) -> list[Config]:
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
            configs.append(Config("cpu", []))  # the CPU reference alone, said explicitly
            continue
        if name in ("auto", "default"):
            configs.append(Config(name, "auto" if name == "auto" else None))
            continue
        try:
            configs.append(Config(name, [load_delegate(name, options.get(name, {}))]))
        except DelegateUnavailableError as exc:
            configs.append(Config(name, None, unavailable=str(exc)))
    return configs


def add_ratios(result: dict[str, Any]) -> None:
    base = result["configs"][0]
    base_avg = base["inference"]["avg"]
    for c in result["configs"]:
        if c.get("available"):
            avg = c["inference"]["avg"]
            c["latency_ratio_vs_cpu"] = avg / base_avg if base_avg else None
            c["speedup_vs_cpu"] = base_avg / avg if avg else None


def op_profile(config: Config) -> list[dict[str, Any]]:
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

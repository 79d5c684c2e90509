"""What a sweep worker does, in either engine: load one model under every configuration once,
then run shards of items through all of them.

One worker holds every configuration of its model, the reference among them, and runs each
item through all of them in turn: outputs are compared with the reference's where they were
computed, so only per-item figures leave the worker, never output arrays, and configurations
share the machine's slow moments alike (as ``offload benchmark --compare`` interleaves them).
Every figure that is not a time depends only on the item and the model, never on the worker
or on which items it ran before (state is reset per item in stateful models), which is what
makes the two engines agree.

A configuration that kills its worker (a crash in an engine's native code, an abort, an exit)
must not take the model's other configurations with it. Each shard leaves a trail
(:class:`Trail`): a small file saying which configuration the worker is loading or running,
which the local engine reads when a worker dies, and a task can skip configurations
(``ModelTask.skip``) that the engine found killing workers.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import socket
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from offload._config_spec import ConfigSpec
from offload._interpreter import Interpreter
from offload._per_node_result import compare_tensors
from offload._sweep_data import DataSpec, Item, item_inputs
from offload.errors import DelegateUnavailableError, OffloadError, PluginError

__all__ = [
    "ModelTask",
    "ConfigInfo",
    "SweepShard",
    "ModelRunner",
    "run_shard",
    "TOP_K",
    "Trail",
    "read_trail",
    "STARTED",
]

TOP_K = 5
# What a trail holds while the worker is in none of the configurations (reading inputs,
# comparing outputs); a configuration's index (0, 1, ...) while it loads or runs.
STARTED = -1

# Runners constructed in this process, per model path: what the one-load-per-worker rule is
# checked against (a runner reloaded per shard or per batch would count up here).
_PROCESS_LOADS: collections.Counter[str] = collections.Counter()


@dataclass(frozen=True)
class ModelTask:
    """Everything a worker needs to load one model under every configuration."""

    model_index: int
    model_path: str
    configs: tuple[ConfigSpec, ...]
    reference: int  # index into configs
    data: DataSpec
    num_threads: int | None = None
    auto_budget_s: float | None = None
    # (configuration index, why): configurations not loaded at all, each item failing with
    # the reason (the local engine's answer to a configuration that kills its workers).
    skip: tuple[tuple[int, str], ...] = ()
    # The data set's first items: an "auto" configuration checks its candidates on them too
    # (Interpreter(auto_inputs=...)), so the choice holds on the data the sweep runs.
    auto_samples: tuple[Item, ...] = ()

    @property
    def key(self) -> tuple[Any, ...]:
        return (
            self.model_index,
            self.model_path,
            self.configs,
            self.reference,
            self.data,
            self.skip,
        )

    def skipping(self, config: int, reason: str) -> ModelTask:
        """This task with configuration ``config`` skipped for ``reason``."""
        return dataclasses.replace(self, skip=(*self.skip, (config, reason)))


class Trail:
    """Which configuration a worker is in, kept in a file the driver reads if the worker dies.

    The worker writes the configuration's index before it loads or invokes it, and
    :data:`STARTED` between configurations: one 12-byte ``pwrite`` in place, outside the timed
    region. Without a path (the serial and Ray engines) it does nothing.
    """

    WIDTH = 12

    def __init__(self, path: str | None = None) -> None:
        self.fd = None if path is None else os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        self.mark(STARTED)

    def mark(self, config: int) -> None:
        if self.fd is not None:
            os.pwrite(self.fd, f"{config:>{self.WIDTH}}".encode(), 0)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def read_trail(path: str) -> int | None:
    """What a shard's trail says: None if the shard never started (no trail), :data:`STARTED`
    if the worker was in no configuration, else the index of the one it was in."""
    try:
        with open(path, "rb") as fh:
            text = fh.read(Trail.WIDTH).strip()
    except OSError:
        return None
    try:
        return int(text)
    except ValueError:  # created, not yet written: started, in no configuration
        return STARTED


@dataclass
class ConfigInfo:
    """One configuration as this worker loaded it."""

    status: str  # "ok", "failed" (to load) or "unavailable"
    reason: str = ""
    init_s: float = float("nan")
    memory_bytes: int = 0
    delegates: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    nodes: dict[str, int] = field(default_factory=dict)  # per delegate, "cpu" included


@dataclass
class SweepShard:
    """A shard's figures: one entry per item and configuration, and who computed them."""

    model_index: int
    worker: str
    pid: int
    process_loads: int
    configs: list[ConfigInfo]
    # Per item: (index, input error or None, one dict of figures per configuration).
    items: list[tuple[int, str | None, list[dict[str, Any]]]]


def _describe(exc: BaseException) -> str:
    # offload's own errors say what went wrong in words; anything else is named by its type.
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, OffloadError) else f"{type(exc).__name__}: {text}"


class ModelRunner:
    """One model under every configuration of a task, loaded once, run item by item."""

    def __init__(self, task: ModelTask, trail: Trail | None = None) -> None:
        _PROCESS_LOADS[task.model_path] += 1
        self.task = task
        self.trail = trail or Trail()
        self.worker = f"{socket.gethostname()}:{os.getpid()}"
        self.interpreters: list[Interpreter | None] = []
        self.infos: list[ConfigInfo] = []
        self.skipped = dict(task.skip)
        for k, spec in enumerate(task.configs):
            if k in self.skipped:
                it, info = None, ConfigInfo("failed", self.skipped[k])
            else:
                self.trail.mark(k)
                it, info = self._load(spec)
            self.interpreters.append(it)
            self.infos.append(info)
        self.trail.mark(STARTED)
        live = next((it for it in self.interpreters if it is not None), None)
        self.details = [] if live is None else live.get_input_details()
        self.outputs = [] if live is None else [d["index"] for d in live.get_output_details()]
        self.stateful = live is not None and any(t.is_variable for t in live.model.main.tensors)
        self.warmed = False

    def _load(self, spec: ConfigSpec) -> tuple[Interpreter | None, ConfigInfo]:
        kwargs: dict[str, Any] = {"num_threads": self.task.num_threads}
        if self.task.auto_budget_s is not None:
            kwargs["auto_budget_s"] = self.task.auto_budget_s
        try:
            delegates = spec.interpreter_delegates()
        except (DelegateUnavailableError, PluginError) as exc:
            return None, ConfigInfo("unavailable", str(exc))
        except Exception as exc:
            return None, ConfigInfo("failed", f"configuration did not load: {_describe(exc)}")
        if delegates == "auto" and self.task.auto_samples:
            kwargs["auto_inputs"] = self._auto_samples()
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                # A delegate that falls back is in the row's plan; its warning is noise here.
                warnings.simplefilter("ignore")
                it = Interpreter(model_path=self.task.model_path, delegates=delegates, **kwargs)
                it.allocate_tensors()
        except Exception as exc:
            return None, ConfigInfo(
                "failed", f"did not load under this configuration: {_describe(exc)}"
            )
        init_s = time.perf_counter() - t0
        report = it.memory_report()
        memory = sum(
            report[k]
            for k in ("tensors", "arena", "cpu_kernel_buffers", "delegate_buffers")
            if k in report
        ) + report.get("cpu_kernel_scratch", 0)
        plan = it.plan()
        nodes = {name: len(plan.nodes_of(name)) for name in plan.delegates}
        nodes["cpu"] = len(plan.cpu_nodes())
        used = [(d.name, d.options.model_dump(exclude_defaults=True)) for d in it.delegates]
        return it, ConfigInfo("ok", "", init_s, int(memory), used, nodes)

    def _auto_samples(self) -> list[list[np.ndarray]] | None:
        """The task's sample items as inputs; None (auto's own sets alone) when an item does
        not make inputs: that item's rows fail with the reason anyway."""
        details = Interpreter(model_path=self.task.model_path, delegates=[]).get_input_details()
        try:
            return [item_inputs(self.task.data, item, details) for item in self.task.auto_samples]
        except Exception:
            return None

    def _invoke(self, it: Interpreter, inputs: list[np.ndarray]) -> tuple[float, list[np.ndarray]]:
        if self.stateful:
            it.reset_all_variables()
        for d, value in zip(self.details, inputs):
            it.set_tensor(d["index"], value)
        t0 = time.perf_counter()
        it.invoke()
        elapsed = time.perf_counter() - t0
        return elapsed, [it.get_tensor(t) for t in self.outputs]

    def run(self, items: list[Item]) -> SweepShard:
        rows: list[tuple[int, str | None, list[dict[str, Any]]]] = []
        for item in items:
            self.trail.mark(STARTED)
            try:
                inputs = item_inputs(self.task.data, item, self.details)
            except Exception as exc:
                rows.append((item.index, str(exc), []))
                continue
            if not self.warmed:
                self._warm_up(inputs)
            rows.append((item.index, None, self._run_item(item, inputs)))
        return SweepShard(
            self.task.model_index,
            self.worker,
            os.getpid(),
            _PROCESS_LOADS[self.task.model_path],
            self.infos,
            rows,
        )

    def _warm_up(self, inputs: list[np.ndarray]) -> None:
        # The first invoke pays for lazy work (page faults, engine compilation, caches): it is
        # init, not latency, as benchmark_model's warm-up runs are.
        self.warmed = True
        for k, it in enumerate(self.interpreters):
            if it is not None:
                self.trail.mark(k)
                try:
                    self._invoke(it, inputs)
                except Exception:  # reported by the item that runs next
                    pass
        self.trail.mark(STARTED)

    def _run_item(self, item: Item, inputs: list[np.ndarray]) -> list[dict[str, Any]]:
        results: list[dict[str, Any] | None] = [None] * len(self.interpreters)
        outputs: list[list[np.ndarray] | None] = [None] * len(self.interpreters)
        for k, it in enumerate(self.interpreters):
            if it is None:
                results[k] = {"error": self.skipped.get(k, "not loaded")}
                continue
            self.trail.mark(k)
            try:
                latency, produced = self._invoke(it, inputs)
            except Exception as exc:
                results[k] = {"error": _describe(exc)}
                continue
            outputs[k] = produced
            results[k] = {"error": None, "latency_s": latency, **_top_k(produced, item.label)}
        self.trail.mark(STARTED)  # comparing outputs is no configuration's doing
        ref = outputs[self.task.reference]
        for k, out in enumerate(outputs):
            if out is not None and ref is not None and results[k] is not None:
                results[k].update(_agreement(ref, out))  # type: ignore[union-attr]
        return [r if r is not None else {"error": "not run"} for r in results]


def _top_k(outputs: list[np.ndarray], label: int) -> dict[str, Any]:
    """Top-k classes of the first output (integer codes rank as their dequantized values)."""
    if not outputs or outputs[0].size == 0 or outputs[0].dtype.kind not in "fiub":
        return {"top": []}
    scores = outputs[0].reshape(-1)
    scores = scores.astype(np.float64 if scores.dtype.kind == "f" else np.int64)
    top = [int(c) for c in np.argsort(-scores, kind="stable")[:TOP_K]]
    result: dict[str, Any] = {"top": top}
    if label >= 0:
        result["hit1"] = top[0] == label
        result["hit5"] = label in top
    return result


def _agreement(ref: list[np.ndarray], out: list[np.ndarray]) -> dict[str, Any]:
    """This item's error against the reference, over every output: floats in their units and
    relative to the largest reference magnitude, integer outputs in quantization steps."""
    max_error = mean_error = rel = max_steps = mean_steps = None
    float_sum = float_count = step_sum = step_count = 0.0
    notes = []
    for k, (a, b) in enumerate(zip(ref, out)):
        c = compare_tensors(a, b, float("inf"), 2**62)
        if c.note:
            notes.append(f"output {k}: {c.note}")
            continue
        if c.kind == "float" and c.max_error is not None:
            max_error = max(max_error or 0.0, c.max_error)
            rel = max(rel or 0.0, c.relative_error or 0.0)
            with np.errstate(invalid="ignore", over="ignore"):
                float_sum += float(np.abs(a.astype(np.float64) - b.astype(np.float64)).sum())
            float_count += a.size
        elif c.kind == "integer" and c.max_error is not None:
            max_steps = max(max_steps or 0, int(c.max_error))
            step_sum += float(np.abs(a.astype(np.int64) - b.astype(np.int64)).sum())
            step_count += a.size
    if float_count:
        mean_error = float_sum / float_count
    if step_count:
        mean_steps = step_sum / step_count
    agree = None
    if ref and out and ref[0].size and ref[0].shape == out[0].shape:
        agree = bool(np.argmax(ref[0].reshape(-1)) == np.argmax(out[0].reshape(-1)))
    return {
        "max_error": max_error,
        "mean_error": mean_error,
        "rel_error": rel,
        "max_steps": max_steps,
        "mean_steps": mean_steps,
        "agree1": agree,
        "note": "; ".join(notes),
    }


# -- the local engine's worker function ---------------------------------------------------------

# A worker keeps the runners of the last few models it ran: shards are handed out model by
# model, so each worker loads each model once, and memory stays bounded on long model lists.
_RUNNERS: collections.OrderedDict[tuple[Any, ...], ModelRunner] = collections.OrderedDict()
_KEEP_RUNNERS = 2


def runner_for(task: ModelTask, trail: Trail | None = None) -> ModelRunner:
    runner = _RUNNERS.get(task.key)
    if runner is None:
        runner = _RUNNERS[task.key] = ModelRunner(task, trail)
        while len(_RUNNERS) > _KEEP_RUNNERS:
            _RUNNERS.popitem(last=False)
    else:
        _RUNNERS.move_to_end(task.key)
        runner.trail = trail or Trail()
    return runner


def run_shard(task: ModelTask, items: list[Item], trail: str | None = None) -> SweepShard:
    """One shard in this process, loading the task's model only if this process has not;
    with ``trail``, a file that says which configuration it is in (:class:`Trail`)."""
    marks = Trail(trail)
    try:
        return runner_for(task, marks).run(items)
    finally:
        marks.close()

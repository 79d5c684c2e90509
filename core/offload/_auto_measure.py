"""Measuring candidate plans for ``delegates="auto"``: inputs, the accuracy policy, timing.

The protocol, so that a choice can be explained and its cost bounded:

1. **Inputs** (:func:`gate_inputs`, the same for every candidate): one set per family of
   :data:`GATE_FAMILIES`, each seeded, covering what models are fed: floats uniform in
   [-1, 1) (the set every run after the checks uses), uniform in [0, 1) (image-like),
   N(0, 1) and N(0, 4); quantized integer inputs get each family's values quantized with the
   input's own scale and zero point, plus a set over their full code range; other integers
   are 0..3 (safe as indices and sizes), booleans at random. The user's own samples
   (``auto_inputs=``) are sets of their own, after these.
2. **The CPU reference runs first**: it is the oracle the others are checked against, and a
   candidate like any other. Its outputs on each set are the expected ones.
3. **Each other candidate** is prepared (its ``allocate_tensors``: exports, compiles, weight
   transforms), which is timed but not charged to the budget, then run from a fresh state
   once on each input set in order (the first run timed; the other sets are not charged to
   the budget), and then again on the first set, untimed, for :data:`WARMUP_S` and at least
   :data:`WARMUP_RUNS` runs in all: the runs on the sets are the accuracy check (see
   :class:`~offload._auto_accuracy.AccuracyPolicy`: a candidate is kept only if it agrees on
   every set; its error is the worst over the sets); the others bring the engine to its
   steady state (thread pools spun up, the cores' clocks raised: after the machine idled,
   LiteRT on this project's 2-core VM takes 1.4x its steady time on the first run and 1.1x on
   the second, and XNNPACK on 16 threads took up to 9x on its first runs on a 16-core host). A
   candidate that fails to prepare or invoke, or hands a partition back to the CPU meanwhile,
   is dropped with the reason.
4. **Timed rounds** then invoke every remaining candidate in turn, a block of
   :data:`BLOCK_RUNS` runs each after one untimed run, a new order each round, so a slow
   phase of the machine falls on all of them alike. Before each candidate's runs (warm-up and
   timed) auto waits until the process is quiet, the previous candidate's helper threads
   stopped (:func:`wait_for_quiet`, at most :data:`QUIET_LIMIT_S`, not charged to the budget);
   the untimed run after it is the one the idle machine slows. A candidate whose warm-up runs
   (the median of its last three) took :data:`WARM_FAR_FACTOR` times the best one's is not
   timed at all, nor, when a round of the others would not fit the budget, one that took
   :data:`WARM_DROP_FACTOR` times; one whose fastest of at least 3 runs took
   :data:`DROP_FACTOR` times the best median so far stops being timed: the close contenders
   get the runs. Rounds stop when every candidate has :data:`MAX_RUNS` runs, or before a
   round that would overrun the budget. A candidate never timed is judged by its warm-up runs.
5. **The budget** covers the runs (warm-up runs included), not the preparations; a candidate
   whose turn comes after the budget is spent is not prepared at all and is reported as
   "not measured". A run in progress is never interrupted, so the budget can be overrun by
   the warm-up runs of the last candidate started (timed rounds are sized to fit).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from offload._auto_accuracy import AccuracyPolicy
from offload._executor import Executor
from offload._seeded_inputs import (
    FULL_CODE_RANGE,
    GATE_FAMILIES,
    Family,
    draw_inputs,
    subgraph_specs,
)
from offload._tensor_values import checked_input
from offload.errors import TensorTypeError, UsageError

if TYPE_CHECKING:
    from offload._delegate import Delegate
    from offload._graph import Subgraph
    from offload._plan import Plan

__all__ = [
    "AccuracyPolicy",
    "GATE_FAMILIES",
    "GATE_VERSION",
    "GateInput",
    "DROP_FACTOR",
    "MAX_RUNS",
    "QUIET_LIMIT_S",
    "wait_for_quiet",
    "WARMUP_RUNS",
    "WARMUP_S",
    "WARM_DROP_FACTOR",
    "WARM_FAR_FACTOR",
    "Trial",
    "Unmeasurable",
    "checked_samples",
    "gate_inputs",
    "measure",
    "seeded_inputs",
]

MAX_RUNS = 15
DROP_FACTOR = 1.5
WARM_DROP_FACTOR = 1.5
WARM_FAR_FACTOR = 4.0
# Engines warm up over a few runs (OpenVINO's first runs take 2x its steady time), and the
# machine's cores over a few milliseconds: the runs after the checked first one go on, untimed,
# until WARMUP_S has passed and there are WARMUP_RUNS runs in all.
WARMUP_RUNS = 2
WARMUP_S = 0.03
# Each round times a block of runs per candidate (fewer when the budget is short).
BLOCK_RUNS = 3
# Before each candidate runs, auto waits until this process is quiet: helper threads of the
# candidate before it (numpy's BLAS after the CPU reference's products: OpenBLAS spins up to
# ~0.1 s; PoCL's and OpenVINO's pools) would otherwise share the cores with it. On a 16-core
# host LiteRT's XNNPACK on 16 threads took 2-13x its steady time right after the reference, and
# was dropped for it. Quiet: over one step of QUIET_STEP_S while auto sleeps (QUIET_CONFIRM_S
# once other threads were seen running), the process used under QUIET_SHARE of a core, and (on
# Linux) no other thread of it is runnable: on a loaded machine a spinning thread can go a
# whole step without a core. At most QUIET_LIMIT_S per wait; the waits are not charged to the
# budget.
QUIET_STEP_S = 0.001
QUIET_CONFIRM_S = 0.01
QUIET_SHARE = 0.1
QUIET_LIMIT_S = 0.25


class Unmeasurable(Exception):
    """Why no candidate can be measured (the model's inputs, or the reference failing)."""


# Part of every stored decision's key: a decision measured by another gate is measured again.
GATE_VERSION = 2


@dataclass(frozen=True)
class GateInput:
    """One input set of the accuracy gate: its family's (or sample's) name and the arrays, in
    the subgraph's input order."""

    name: str
    arrays: list[np.ndarray]


def _draw(
    subgraph: Subgraph, shapes: Sequence[tuple[int, ...]], seed: Any, family: Family
) -> list[np.ndarray]:
    try:
        return draw_inputs(subgraph_specs(subgraph, shapes), np.random.default_rng(seed), family)
    except UsageError as exc:
        raise Unmeasurable(f"{exc}: auto cannot fill it with seeded values") from exc


def seeded_inputs(subgraph: Subgraph, shapes: Sequence[tuple[int, ...]]) -> list[np.ndarray]:
    """The first gate set, which the timed runs use (see the module's protocol)."""
    return _draw(subgraph, shapes, 0, GATE_FAMILIES[0])


def checked_samples(
    subgraph: Subgraph, shapes: Sequence[tuple[int, ...]], samples: Any
) -> tuple[tuple[np.ndarray, ...], ...]:
    """``auto_inputs=`` as input sets in the subgraph's input order: a sequence of samples,
    each a sequence of arrays in input order, a mapping from input name to array, or (for a
    model of one input) an array. Each array must have the input's dtype and its shape at
    ``allocate_tensors``, as ``set_tensor`` requires."""
    names = [subgraph.tensors[i].name for i in subgraph.inputs]
    if isinstance(samples, (str, bytes, np.ndarray, Mapping)) or not isinstance(samples, Sequence):
        raise TensorTypeError(
            "auto_inputs expects a sequence of samples (each a sequence of arrays in input "
            f"order, or a mapping from input name to array), found {type(samples).__name__}"
        )
    checked = []
    for k, sample in enumerate(samples):
        if isinstance(sample, Mapping):
            unknown = sorted(set(map(str, sample)) - set(names))
            missing = [n for n in names if n not in sample]
            if unknown or missing:
                raise TensorTypeError(
                    f"auto_inputs[{k}] must name the model's inputs {names}; found "
                    f"{sorted(map(str, sample))}"
                )
            arrays = [sample[n] for n in names]
        elif isinstance(sample, np.ndarray) and len(names) == 1:
            arrays = [sample]
        elif isinstance(sample, Sequence) and not isinstance(sample, (str, bytes)):
            arrays = list(sample)
        else:
            raise TensorTypeError(
                f"auto_inputs[{k}] must be a sequence of {len(names)} array(s) or a mapping "
                f"from input name to array, found {type(sample).__name__}"
            )
        if len(arrays) != len(names):
            raise TensorTypeError(
                f"auto_inputs[{k}] has {len(arrays)} array(s); the model has {len(names)} "
                f"input(s) {names}"
            )
        checked.append(
            tuple(
                checked_input(
                    subgraph.tensors[i],
                    value,
                    tuple(shapes[i]),
                    f"auto_inputs[{k}] input {j}",
                ).copy()
                for j, (i, value) in enumerate(zip(subgraph.inputs, arrays))
            )
        )
    return tuple(checked)


def gate_inputs(
    subgraph: Subgraph,
    shapes: Sequence[tuple[int, ...]],
    samples: Sequence[Sequence[np.ndarray]] = (),
    seed: int = 0,
) -> list[GateInput]:
    """The accuracy gate's input sets (see the module's protocol): one per family, seeded
    (``seed`` 0 is auto's own; another seed draws independent sets of the same families), the
    full code range where an input is quantized, then ``samples``, already checked against
    the inputs' shapes and dtypes."""
    gate = [
        GateInput(family.name, _draw(subgraph, shapes, (seed, k), family))
        for k, family in enumerate(GATE_FAMILIES)
    ]
    if seed == 0:  # the timed set keeps the draw auto always used
        gate[0] = GateInput(gate[0].name, seeded_inputs(subgraph, shapes))
    if any(spec.quantized for spec in subgraph_specs(subgraph, shapes)):
        codes = _draw(subgraph, shapes, (seed, len(GATE_FAMILIES)), FULL_CODE_RANGE)
        gate.append(GateInput(FULL_CODE_RANGE.name, codes))
    gate.extend(GateInput(f"sample {k}", list(arrays)) for k, arrays in enumerate(samples))
    return gate


@dataclass
class Trial:
    """One candidate being measured, and what became of it."""

    label: str
    delegates: list[Delegate]
    plan: Plan | None = None
    status: str = "waiting"  # measuring, chosen, measured, dropped, failed, inaccurate, ...
    reason: str = ""
    prepare_s: float | None = None
    first_s: float | None = None
    warm_s: float | None = None  # the median of the last three warm-up runs
    times: list[float] = field(default_factory=list)
    executor: Executor | None = None
    notes: list[str] = field(default_factory=list)
    # Its outputs' distance from the reference's (AccuracyPolicy.deviation): the worst over
    # the gate's input sets, and each set's.
    error: dict[str, float] | None = None
    error_by_input: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def median_s(self) -> float | None:
        if self.times:
            return statistics.median(self.times)
        return self.warm_s if self.warm_s is not None else self.first_s

    def release(self) -> None:
        self.executor = None

    def timing(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "prepare_ms": None if self.prepare_s is None else 1e3 * self.prepare_s,
            "first_ms": None if self.first_s is None else 1e3 * self.first_s,
            "runs": len(self.times),
        }
        if self.warm_s is not None:
            out["warm_ms"] = 1e3 * self.warm_s
        median = self.median_s
        out["median_ms"] = None if median is None else 1e3 * median
        if self.times:
            out["min_ms"] = 1e3 * min(self.times)
            out["max_ms"] = 1e3 * max(self.times)
        return out


def _failure(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _run(executor: Executor, inputs: Sequence[np.ndarray]) -> tuple[float, list[np.ndarray]]:
    """One inference as a user runs it: set the inputs, invoke, copy the outputs out."""
    sg = executor.subgraph
    start = time.perf_counter()
    for i, value in zip(sg.inputs, inputs):
        buf = executor.buffers[i]
        if buf is None or buf.shape != value.shape or not buf.flags.writeable:
            executor.buffers[i] = np.array(value, copy=True)
        else:
            np.copyto(buf, value)
    executor.invoke()
    outputs = [np.array(executor.buffers[o], copy=True) for o in sg.outputs]
    return time.perf_counter() - start, outputs


def _restored(executor: Executor) -> str:
    return "; ".join(executor.restored.values())


def measure(
    reference: Trial,
    others: Sequence[Trial],
    make_executor: Callable[[Trial], Executor],
    gate: Sequence[GateInput],
    budget_s: float,
    policy: AccuracyPolicy,
) -> float:
    """Measure ``reference`` then ``others`` by the module's protocol, checking each on every
    set of ``gate`` (the first is the timed one); returns the seconds the runs took (what the
    budget bounds). Each trial ends with a status and reason; the ones still "measuring" at
    the end are the accurate, measured candidates, executors kept."""
    spent = 0.0
    inputs = gate[0].arrays
    expected: list[list[np.ndarray]] = []

    def first_run(trial: Trial) -> list[list[np.ndarray]] | None:
        """Prepare, run on every gate set (the reference: all; another trial: until one
        disagrees), then warm up. None when it failed or disagreed (status and reason set)."""
        nonlocal spent
        outputs: list[list[np.ndarray]] = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                start = time.perf_counter()
                executor = make_executor(trial)
                executor.allocate()
                trial.prepare_s = time.perf_counter() - start
                if executor.restored:
                    raise _Dropped(f"failed to prepare: {_restored(executor)}")
                wait_for_quiet()
                elapsed, found = _run(executor, inputs)
                spent += elapsed
                trial.first_s = elapsed
                outputs.append(found)
                if expected and _disagrees(trial, executor, gate, 0, found, expected, policy):
                    return None
                for k in range(1, len(gate)):
                    found = _run(executor, gate[k].arrays)[1]
                    outputs.append(found)
                    if expected and _disagrees(trial, executor, gate, k, found, expected, policy):
                        return None
                warm: list[float] = []
                started = time.perf_counter()
                while len(warm) < WARMUP_RUNS - 1 or time.perf_counter() - started < WARMUP_S:
                    warm.append(_run(executor, inputs)[0])
                    spent += warm[-1]
                trial.warm_s = statistics.median(warm[-3:]) if warm else elapsed
                if executor.restored:
                    raise _Dropped(f"failed in invoke: {_restored(executor)}")
            except _Dropped as exc:
                trial.status, trial.reason = "failed", str(exc)
                return None
            except Exception as exc:  # a candidate must never take auto down
                stage = "prepare" if trial.prepare_s is None else "invoke"
                trial.status, trial.reason = "failed", f"failed to {stage}: {_failure(exc)}"
                return None
            finally:
                trial.notes.extend(str(w.message) for w in caught)
        trial.executor = executor
        trial.status = "measuring"
        return outputs

    reference_outputs = first_run(reference)
    if reference_outputs is None:
        raise Unmeasurable(f"the CPU reference could not run the model: {reference.reason}")
    expected.extend(reference_outputs)
    for trial in others:
        if spent >= budget_s:
            trial.status = "not measured"
            trial.reason = f"the budget ({budget_s:g} s) was spent before its turn"
            continue
        if first_run(trial) is None:
            trial.release()

    live = [t for t in (reference, *others) if t.status == "measuring"]
    # Not timed further: a candidate whose warm-up runs took WARM_FAR_FACTOR times the best
    # one's, and, when a round of the others would not fit the budget (a large model), one
    # that took WARM_DROP_FACTOR times: the close contenders need the runs. Otherwise the timed
    # runs decide (see DROP_FACTOR): a warm-up can be some way off the steady time.
    best_warm = min((t.warm_s for t in live if t.warm_s is not None), default=None)
    if best_warm:
        near = [t.warm_s or 0.0 for t in live if (t.warm_s or 0.0) <= WARM_FAR_FACTOR * best_warm]
        fits = spent + (BLOCK_RUNS + 1) * sum(near) <= budget_s
        factor = WARM_FAR_FACTOR if fits else WARM_DROP_FACTOR
        for trial in live:
            if trial.warm_s is not None and trial.warm_s > factor * best_warm:
                trial.status = "measured"
                trial.reason = (
                    f"not timed further: its warm-up runs took {trial.warm_s / best_warm:.1f}x "
                    "the best one's"
                )
    live = [t for t in live if t.status == "measuring"]
    rounds = 0
    while live:
        if all(len(t.times) >= MAX_RUNS for t in live):
            break
        estimate = sum(t.median_s or 0.0 for t in live)
        block = next((b for b in (BLOCK_RUNS, 1) if spent + (b + 1) * estimate <= budget_s), 0)
        if not block:
            break
        order = live[rounds % len(live) :] + live[: rounds % len(live)]
        for trial in order:
            wait_for_quiet()
            # The run the wait's idle slows: run, not recorded.
            spent += _timed(trial, inputs, record=False)
            for _ in range(block):
                if trial.status == "measuring":
                    spent += _timed(trial, inputs)
        rounds += 1
        live = [t for t in live if t.status == "measuring"]
        best = min((t.median_s for t in live if t.median_s is not None), default=None)
        for trial in live:
            if best and len(trial.times) >= 3 and min(trial.times) > DROP_FACTOR * best:
                trial.status = "measured"
                trial.reason = (
                    f"stopped after {len(trial.times)} runs: its fastest run took more than "
                    f"{DROP_FACTOR:g}x the best median"
                )
        live = [t for t in live if t.status == "measuring"]
    for trial in (reference, *others):
        if trial.status == "failed":
            trial.release()
    return spent


def wait_for_quiet(limit_s: float = QUIET_LIMIT_S) -> float:
    """Sleep until this process's other threads have stopped using the CPU (at most
    ``limit_s``); returns the seconds waited. The process's CPU time grows while the calling
    thread sleeps only by what other threads (BLAS helpers, engine thread pools) run."""
    start = time.perf_counter()
    step = QUIET_STEP_S
    while True:
        cpu, wall = time.process_time(), time.perf_counter()
        time.sleep(step)
        now = time.perf_counter()
        idle = time.process_time() - cpu <= QUIET_SHARE * (now - wall)
        if (idle and not _runnable_threads()) or now - start >= limit_s:
            return now - start
        # Other threads ran: judge from now on over steps that a thread waiting for a core
        # on a loaded machine cannot slip through.
        step = QUIET_CONFIRM_S


def _runnable_threads() -> int:
    """How many other threads of this process are running or waiting for a core (their state
    in /proc on Linux; 0 where it cannot be read). A spinning helper that the machine's load
    keeps off the cores uses no CPU time over a step, but stays runnable."""
    me = str(threading.get_native_id())
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 0
    runnable = 0
    for task in tasks:
        if task == me:
            continue
        try:
            with open(f"/proc/self/task/{task}/stat", "rb") as stat:
                fields = stat.read()
        except OSError:  # the thread has ended
            continue
        # The state follows the thread's name, which is in parentheses and may hold anything.
        end = fields.rfind(b")")
        runnable += fields[end + 2 : end + 3] == b"R"
    return runnable


def _timed(trial: Trial, inputs: Sequence[np.ndarray], record: bool = True) -> float:
    """One run of a measuring trial, its time kept in ``trial.times`` when ``record``; a
    failure ends its measuring, with the reason. Returns the run's seconds (for the budget)."""
    executor = trial.executor
    assert executor is not None
    elapsed = 0.0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            elapsed, _ = _run(executor, inputs)
        except Exception as exc:
            trial.status, trial.reason = "failed", f"failed in invoke: {_failure(exc)}"
        trial.notes.extend(str(w.message) for w in caught)
    if trial.status == "measuring" and executor.restored:
        trial.status, trial.reason = "failed", f"failed in invoke: {_restored(executor)}"
    if trial.status == "measuring" and record:
        trial.times.append(elapsed)
    return elapsed


class _Dropped(Exception):
    pass


def _disagrees(
    trial: Trial,
    executor: Executor,
    gate: Sequence[GateInput],
    k: int,
    found: list[np.ndarray],
    expected: Sequence[list[np.ndarray]],
    policy: AccuracyPolicy,
) -> bool:
    """Check ``found`` (on gate set ``k``) against the reference; keep the worst error over
    the sets so far in ``trial.error`` and each set's in ``trial.error_by_input``. True, with
    the trial marked inaccurate (which set, and by how much), when it disagrees."""
    subgraph = executor.subgraph
    error = policy.deviation(subgraph, found, expected[k])
    trial.error_by_input[gate[k].name] = error
    worst = dict(trial.error or {})
    for unit, value in error.items():
        worst[unit] = max(worst.get(unit, 0.0), value)
    trial.error = worst
    why = policy.check(subgraph, found, expected[k])
    if why:
        trial.status, trial.reason = "inaccurate", f"on input set {gate[k].name!r}: {why}"
        return True
    return False

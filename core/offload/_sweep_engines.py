"""The two engines of ``offload sweep``: a process pool here, or Ray Data on a cluster.

Both cut each model's items into shards and hand every shard result to ``collect`` as it
arrives; the report is built from those results alone, so the engines differ only in where
the shards run. A result is whole or absent: a worker that dies mid-shard delivers nothing
for that shard, the shard runs again, and the collector keeps the first result per item,
so nothing is counted twice.

The local engine also finds which configuration killed a worker. When the pool breaks, every
worker in it goes down, so a death there names no culprit; the shards that were running run
again one at a time, each alone in its worker, where a death is that shard's and its trail
(``_sweep_worker.Trail``) says which configuration it was in. A configuration that kills
its worker :data:`MAX_ATTEMPTS` times is skipped for that model: its rows fail with the
reason, and the model's other configurations run and report their figures.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import multiprocessing
import pickle
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import numpy as np

from offload._sweep_data import Item
from offload._sweep_worker import (
    ModelRunner,
    ModelTask,
    SweepShard,
    read_trail,
    run_shard,
)
from offload.errors import UsageError

__all__ = ["Job", "run_local", "run_ray", "import_ray", "MAX_ATTEMPTS"]

# A model's task and the shards of its items.
Job = tuple[ModelTask, list[list[Item]]]
Collect = Callable[[SweepShard], None]
# A shard is tried this many times before its items are reported failed with the reason;
# a configuration that kills its worker this many times is skipped for that model.
MAX_ATTEMPTS = 3


def _failed(task: ModelTask, items: list[Item], reason: str) -> SweepShard:
    """The result of a shard that could not be run: each item failed, with the reason."""
    return SweepShard(task.model_index, "", 0, 0, [], [(it.index, reason, []) for it in items])


# -- local ----------------------------------------------------------------------------------------


def run_local(
    jobs: Sequence[Job], workers: int, collect: Collect, in_process: bool | None = None
) -> dict[str, Any]:
    """Every shard in a pool of ``workers`` processes, or in this process (``in_process``;
    by default for one worker), where nothing protects the sweep from a crashing engine."""
    shards = [(task, items) for task, parts in jobs for items in parts]
    if in_process if in_process is not None else workers <= 1:
        for task, items in shards:
            try:
                collect(run_shard(task, items))
            except Exception as exc:
                collect(_failed(task, items, f"shard failed: {type(exc).__name__}: {exc}"))
        return {"retried_shards": 0}
    with tempfile.TemporaryDirectory(prefix="offload-sweep-") as folder:
        return _LocalRun(shards, workers, collect, Path(folder)).run()


class _LocalRun:
    """The process pool and what it learns from workers that die (see the module docstring)."""

    def __init__(
        self,
        shards: Sequence[tuple[ModelTask, list[Item]]],
        workers: int,
        collect: Collect,
        trails: Path,
    ) -> None:
        self.pending = dict(enumerate(shards))
        self.workers = workers
        self.collect = collect
        self.trails = trails
        self.retried: set[int] = set()
        # Deaths seen alone: per (model, configuration) where the trail names one, else per
        # shard (a worker that died outside every configuration, reading its inputs say).
        self.config_deaths: collections.Counter[tuple[int, int]] = collections.Counter()
        self.shard_deaths: collections.Counter[int] = collections.Counter()
        # spawn, not fork: the parent may hold threads (Ray's, a delegate runtime's) that a
        # forked child would inherit mid-lock.
        self.context = multiprocessing.get_context("spawn")

    def run(self) -> dict[str, Any]:
        blind = 0  # pools broken with no shard running: a worker died at start-up, or idle
        while self.pending:
            running = self._together()
            if running:
                self._alone(running)
            elif self.pending:
                blind += 1
                if blind >= MAX_ATTEMPTS:  # nothing to go on: each shard alone, counted
                    self._alone(sorted(self.pending))
        return {"retried_shards": len(self.retried)}

    def _trail(self, sid: int) -> str:
        path = self.trails / f"shard-{sid}"
        path.unlink(missing_ok=True)  # a trail left by an earlier attempt is not this one's
        return str(path)

    def _done(self, sid: int, result: SweepShard) -> None:
        self.pending.pop(sid)
        self.collect(result)

    def _raised(self, sid: int, exc: Exception) -> None:
        # The shard itself raised (not a death): running it again would not help.
        task, items = self.pending.pop(sid)
        self.collect(_failed(task, items, f"shard failed: {type(exc).__name__}: {exc}"))

    def _together(self) -> list[int]:
        """Every pending shard on the pool; the shards that were running if it broke."""
        trails = {sid: self._trail(sid) for sid in self.pending}
        broken = False
        with concurrent.futures.ProcessPoolExecutor(self.workers, mp_context=self.context) as pool:
            futures = {
                pool.submit(run_shard, task, items, trails[sid]): sid
                for sid, (task, items) in self.pending.items()
            }
            for future in concurrent.futures.as_completed(futures):
                sid = futures[future]
                try:
                    result = future.result()
                except BrokenProcessPool:
                    broken = True  # a worker died: this shard and the others in flight go again
                    continue
                except Exception as exc:
                    self._raised(sid, exc)
                    continue
                self._done(sid, result)
        if not broken:
            return []
        self.retried.update(self.pending)
        return [sid for sid in sorted(self.pending) if read_trail(trails[sid]) is not None]

    def _alone(self, sids: Sequence[int]) -> None:
        """Each shard in turn on a pool of one worker, so that a death is that shard's own;
        until it delivers, fails, or has killed its worker too often."""
        pool: concurrent.futures.ProcessPoolExecutor | None = None
        try:
            for sid in sids:
                while sid in self.pending:
                    task, items = self.pending[sid]
                    trail = self._trail(sid)
                    if pool is None:
                        pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=self.context)
                    try:
                        result = pool.submit(run_shard, task, items, trail).result()
                    except BrokenProcessPool:
                        pool.shutdown()
                        pool = None
                        self._died(sid, read_trail(trail))
                        continue
                    except Exception as exc:
                        self._raised(sid, exc)
                        continue
                    self._done(sid, result)
        finally:
            if pool is not None:
                pool.shutdown()

    def _died(self, sid: int, where: int | None) -> None:
        """Shard ``sid``'s worker died alone, in configuration ``where`` (per its trail)."""
        task, items = self.pending[sid]
        if where is not None and 0 <= where < len(task.configs):
            key = (task.model_index, where)
            self.config_deaths[key] += 1
            if self.config_deaths[key] >= MAX_ATTEMPTS:
                reason = (
                    f"worker process died {self.config_deaths[key]} times in this "
                    "configuration (loading or running it), so it was left out for this "
                    "model and the model's other configurations ran without it"
                )
                for other, (t, its) in self.pending.items():
                    if t.model_index == task.model_index:
                        self.pending[other] = (t.skipping(where, reason), its)
            return
        self.shard_deaths[sid] += 1
        if self.shard_deaths[sid] >= MAX_ATTEMPTS:
            self.pending.pop(sid)
            reason = f"worker process died {self.shard_deaths[sid]} times running this shard"
            self.collect(_failed(task, items, reason))


# -- Ray ----------------------------------------------------------------------------------------


def import_ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401  (Ray Data is a separate import, and the part we need)
    except ImportError:
        raise UsageError(
            "--engine ray needs Ray Data, which is not installed; install offload's Ray extra "
            "with: pip install 'offload[ray]'"
        ) from None
    return ray


def _ray_row(model: int, item: Item) -> dict[str, Any]:
    row: dict[str, Any] = {"model": model, "item": item.index, "path": item.path}
    row["label"] = item.label
    for key, value in item.arrays:
        row[f"array:{key}"] = value
    return row


def _items(batch: dict[str, np.ndarray], rows: Sequence[int]) -> list[Item]:
    keys = [k for k in batch if k.startswith("array:")]
    return [
        Item(
            int(batch["item"][i]),
            str(batch["path"][i]),
            int(batch["label"][i]),
            tuple((k.removeprefix("array:"), np.asarray(batch[k][i])) for k in keys),
        )
        for i in rows
    ]


class RayShardRunner:
    """Ray Data's callable class. An actor loads each model under every configuration once,
    when its first batch of that model arrives, and keeps it for the batches that follow;
    each batch is a shard (split by model where it holds items of two)."""

    def __init__(self, tasks: Sequence[ModelTask]) -> None:
        self.tasks = {task.model_index: task for task in tasks}
        self.runners: dict[int, ModelRunner] = {}

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        models = np.asarray(batch["model"])
        results = []
        for m in dict.fromkeys(int(v) for v in models):
            runner = self.runners.get(m)
            if runner is None:
                runner = self.runners[m] = ModelRunner(self.tasks[m])
            results.append(runner.run(_items(batch, np.flatnonzero(models == m).tolist())))
        # One row per shard: the pickled result travels as bytes, its floats exact.
        blob = np.empty(len(results), dtype=object)
        blob[:] = [pickle.dumps(r) for r in results]
        return {"shard": blob}


def run_ray(
    jobs: Sequence[Job],
    workers: int | None,
    address: str | None,
    collect: Collect,
) -> dict[str, Any]:
    """The sweep as Ray Data pipelines: ``from_items`` over every (model, item), one block
    per shard, then ``map_batches`` with :class:`RayShardRunner` on an actor pool
    (``workers`` actors, or autoscaled up to the cluster's CPUs). Joins the cluster at
    ``address``, or a Ray already started in this process, or starts a local one (shut down
    at the end).

    Nothing a lost actor or node was running is lost with it. Inside a pipeline Ray restarts
    an actor that dies, on another node if its own is gone, and runs its batch again (Ray
    Data asks for unlimited actor restarts and task retries). What the pipeline still does
    not deliver, because it gave up (objects lost with their node, an actor that cannot come
    back) or ended without some batch, runs again in a new pipeline over the items still
    missing, up to :data:`MAX_ATTEMPTS` pipelines in all; only then do those items fail, with
    the reason. Results already collected are kept, never run again, and an item delivered
    twice counts once (the collector keeps the first).
    """
    ray = import_ray()
    started = False
    if not ray.is_initialized():
        ray.init(address=address, logging_level=logging.WARNING, include_dashboard=False)
        started = True
    # Ray Data narrates every pipeline at INFO; the sweep's table is the report.
    data_logger = logging.getLogger("ray.data")
    level = data_logger.level
    data_logger.setLevel(logging.WARNING)
    missing = {task.model_index: {it.index for p in parts for it in p} for task, parts in jobs}

    def keep(result: SweepShard) -> None:
        missing[result.model_index].difference_update(index for index, _, _ in result.items)
        collect(result)

    reran = 0
    reason = "no result came back from Ray"
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False  # the sweep's bar
        for attempt in range(MAX_ATTEMPTS):
            todo = _still_missing(jobs, missing)
            if not todo:
                break
            if attempt:
                reran += sum(len(parts) for _, parts in todo)
            try:
                _ray_pipeline(ray, todo, workers, keep)
            except Exception as exc:  # the pipeline gave up: what it owes runs again
                reason = f"Ray Data failed: {type(exc).__name__}: {exc}"
        for task, parts in _still_missing(jobs, missing):
            why = f"{reason} ({MAX_ATTEMPTS} pipelines ran, none delivered this item)"
            collect(_failed(task, [it for p in parts for it in p], why))
        # Retries inside a pipeline are Ray's and go uncounted: None unless offload re-ran.
        return {"retried_shards": reran or None}
    finally:
        data_logger.setLevel(level)
        if started:
            ray.shutdown()


def _still_missing(jobs: Sequence[Job], missing: dict[int, set[int]]) -> list[Job]:
    """``jobs`` cut down to the items with no result yet, in their shards."""
    todo: list[Job] = []
    for task, parts in jobs:
        left = [[it for it in p if it.index in missing[task.model_index]] for p in parts]
        if any(left):
            todo.append((task, [p for p in left if p]))
    return todo


def _ray_pipeline(ray: Any, jobs: Sequence[Job], workers: int | None, collect: Collect) -> None:
    """One Ray Data pipeline over ``jobs``; each shard result to ``collect`` as it arrives."""
    if workers:
        compute = ray.data.ActorPoolStrategy(size=workers)
    else:
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        compute = ray.data.ActorPoolStrategy(min_size=1, max_size=cpus)
    rows = [_ray_row(task.model_index, item) for task, parts in jobs for p in parts for item in p]
    shards = sum(len(parts) for _, parts in jobs)
    size = max(len(p) for _, parts in jobs for p in parts)
    results = ray.data.from_items(rows, override_num_blocks=shards).map_batches(
        RayShardRunner,
        fn_constructor_kwargs={"tasks": [task for task, _ in jobs]},
        batch_size=size,
        batch_format="numpy",
        compute=compute,
        num_cpus=1,
    )
    for batch in results.iter_batches(batch_size=None, batch_format="numpy"):
        for blob in batch["shard"]:
            collect(pickle.loads(blob))

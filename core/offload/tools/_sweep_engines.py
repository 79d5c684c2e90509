"""The two engines of ``offload sweep``: a process pool here, or Ray Data on a cluster.

Both cut each model's items into shards and hand every shard result to ``collect`` as it
arrives; the report is built from those results alone, so the engines differ only in where
the shards run. A result is whole or absent: a worker that dies mid-shard delivers nothing
for that shard, the shard runs again, and the collector keeps the first result per item,
so nothing is counted twice.
"""

from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing
import pickle
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import numpy as np

from offload.errors import UsageError
from offload.tools._sweep_data import Item
from offload.tools._sweep_worker import ModelRunner, ModelTask, SweepShard, run_shard

__all__ = ["Job", "run_local", "run_ray", "import_ray", "MAX_ATTEMPTS"]

# A model's task and the shards of its items.
Job = tuple[ModelTask, list[list[Item]]]
Collect = Callable[[SweepShard], None]
# A shard is tried this many times before its items are reported failed with the reason.
MAX_ATTEMPTS = 3


def _failed(task: ModelTask, items: list[Item], reason: str) -> SweepShard:
    """The result of a shard that could not be run: each item failed, with the reason."""
    return SweepShard(task.model_index, "", 0, 0, [], [(it.index, reason, []) for it in items])


# -- local ----------------------------------------------------------------------------------------


def run_local(jobs: Sequence[Job], workers: int, collect: Collect) -> dict[str, Any]:
    """Every shard in a pool of ``workers`` processes, or in this process for one worker."""
    shards = [(task, items) for task, parts in jobs for items in parts]
    if workers <= 1:
        for task, items in shards:
            try:
                collect(run_shard(task, items))
            except Exception as exc:
                collect(_failed(task, items, f"shard failed: {type(exc).__name__}: {exc}"))
        return {"retried_shards": 0}
    pending = dict(enumerate(shards))
    attempts = dict.fromkeys(pending, 0)
    retried: set[int] = set()
    # spawn, not fork: the parent may hold threads (Ray's, a delegate runtime's) that a
    # forked child would inherit mid-lock.
    context = multiprocessing.get_context("spawn")
    while pending:
        for sid in pending:
            attempts[sid] += 1
        broken = False
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
            futures = {pool.submit(run_shard, *pending[sid]): sid for sid in pending}
            for future in concurrent.futures.as_completed(futures):
                sid = futures[future]
                try:
                    result = future.result()
                except BrokenProcessPool:
                    broken = True  # a worker died: this shard and the others in flight go again
                    continue
                except Exception as exc:  # the shard itself raised: running it again won't help
                    task, items = pending.pop(sid)
                    collect(_failed(task, items, f"shard failed: {type(exc).__name__}: {exc}"))
                    continue
                pending.pop(sid)
                collect(result)
        if not broken:
            break
        for sid in list(pending):
            retried.add(sid)
            if attempts[sid] >= MAX_ATTEMPTS:
                task, items = pending.pop(sid)
                reason = f"worker process died {attempts[sid]} times running this shard"
                collect(_failed(task, items, reason))
    return {"retried_shards": len(retried)}


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
    """The sweep as one Ray Data pipeline: ``from_items`` over every (model, item), one block
    per shard, then ``map_batches`` with :class:`RayShardRunner` on an actor pool
    (``workers`` actors, or autoscaled up to the cluster's CPUs). Joins the cluster at
    ``address``, or a Ray already started in this process, or starts a local one (shut down
    at the end). An actor that dies is restarted by Ray Data and its batch run again."""
    ray = import_ray()
    started = False
    if not ray.is_initialized():
        ray.init(address=address, logging_level=logging.WARNING, include_dashboard=False)
        started = True
    # Ray Data narrates every pipeline at INFO; the sweep's table is the report.
    data_logger = logging.getLogger("ray.data")
    level = data_logger.level
    data_logger.setLevel(logging.WARNING)
    try:
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False  # the sweep's own bar counts shards
        if workers:
            compute = ray.data.ActorPoolStrategy(size=workers)
        else:
            cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
            compute = ray.data.ActorPoolStrategy(min_size=1, max_size=cpus)
        rows = [
            _ray_row(task.model_index, item) for task, parts in jobs for p in parts for item in p
        ]
        if not rows:
            return {"retried_shards": None}
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
        try:
            for batch in results.iter_batches(batch_size=None, batch_format="numpy"):
                for blob in batch["shard"]:
                    collect(pickle.loads(blob))
        except Exception as exc:  # the pipeline gave up: what had not arrived failed
            reason = f"Ray Data failed: {type(exc).__name__}: {exc}"
            for task, parts in jobs:
                collect(_failed(task, [item for p in parts for item in p], reason))
        # Ray Data retries inside the pipeline and does not say how often.
        return {"retried_shards": None}
    finally:
        data_logger.setLevel(level)
        if started:
            ray.shutdown()

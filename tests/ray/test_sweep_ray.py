"""The Ray engine of offload.sweep: the same figures as the local engine, one load per actor,
a killed actor's batch retried without double counting, a pipeline that gives up followed by
one over what it still owed. A cluster that loses a node: test_sweep_cluster.py."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

import pytest

import offload
from offload import _sweep_engines as engines
from offload._sweep_engines import MAX_ATTEMPTS
from tests._sweep_models import colour_classifier, image_folder
from tests.test_sweep import figures

pytest.importorskip("offload_dummy", reason="offload-dummy is not installed")
pytest.importorskip("offload_litert", reason="offload-litert is not installed")
pytest.importorskip("PIL.Image", reason="pillow is not installed (pip install offload[tools])")

CONFIGS = ["cpu", "dummy", "litert"]


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """2 models x 3 configurations x 1,000 images, with a LiteRT builtin-kernel reference."""
    root = tmp_path_factory.mktemp("sweep-ray")
    models = [
        colour_classifier(root / "plain.tflite"),
        colour_classifier(root / "shifted.tflite", shift=0.25),
    ]
    image_folder(root / "images", 1000)
    return {
        "models": models,
        "configs": CONFIGS,
        "images": root / "images",
        "labels": root / "images_labels.txt",
        "reference": "litert:kernels=builtin",
    }


def test_ray_and_local_agree(grid: dict[str, Any], ray_cluster: Any) -> None:
    """Both engines give identical accuracy and agreement figures; in Ray each actor loads
    each model once, however many batches it runs."""
    local = offload.sweep(**grid, workers=2)
    remote = offload.sweep(**grid, engine="ray", workers=2, shard_size=100)
    assert figures(remote) == figures(local)
    assert len(remote.rows) == 8 and all(r.status == "ok" for r in remote.rows)
    assert all(r.items == 1000 for r in remote.rows)
    plain = remote.row("plain.tflite", "cpu")
    assert 0.85 < plain.top1 < 0.95 and plain.top1_agreement == 1.0
    # 20 batches on 2 actors: each actor ran several, and loaded each model once.
    assert sum(remote.shards_per_worker.values()) == 20
    assert max(remote.shards_per_worker.values()) >= 3
    for model, per_worker in remote.loads.items():
        assert per_worker and set(per_worker.values()) == {1}, (model, per_worker)
    assert remote.duplicates_dropped == 0 and "per worker" in remote.latency_note
    assert ray_cluster.is_initialized()  # a Ray this process started is joined, left running


def test_killed_actor_is_retried(grid: dict[str, Any], ray_cluster: Any) -> None:
    """An actor killed mid-sweep is restarted and its batch retried; nothing counts twice."""
    killed: list[int] = []

    def kill_once(result: offload.SweepShard) -> None:
        if not killed:
            killed.append(result.pid)
            os.kill(result.pid, signal.SIGKILL)

    args = {**grid, "models": grid["models"][:1], "configs": ["cpu"], "reference": "cpu"}
    report = offload.sweep(**args, engine="ray", workers=2, shard_size=25, on_shard=kill_once)
    assert killed
    row = report.row("plain.tflite", "cpu")
    assert row.status == "ok" and row.items == 1000 and row.failed_items == 0
    workers = report.loads[str(grid["models"][0])]
    assert f"{os.uname().nodename}:{killed[0]}" in workers and len(workers) >= 3
    local = offload.sweep(**args, workers=1)
    assert figures(report) == figures(local)


def _pipeline_that_gives_up(
    runs: list[int], deliver: int, then: str = "real"
) -> Callable[..., None]:
    """In place of ``_ray_pipeline``: records each run's item count; the first run delivers
    ``deliver`` shard results and raises as a pipeline that lost objects with their node
    would; later runs are the real one (``then="real"``) or raise at once."""
    real = engines._ray_pipeline

    def run(ray: Any, jobs: Any, workers: Any, collect: Callable[..., None]) -> None:
        runs.append(sum(len(p) for _, parts in jobs for p in parts))
        if len(runs) > 1:
            if then == "real":
                return real(ray, jobs, workers, collect)
            raise RuntimeError("the node holding its objects was lost")
        delivered: list[offload.SweepShard] = []

        def until_lost(result: offload.SweepShard) -> None:
            if len(delivered) == deliver:
                raise RuntimeError("the node holding its objects was lost")
            delivered.append(result)
            collect(result)

        real(ray, jobs, workers, until_lost)

    return run


def test_failed_pipeline_reruns_what_is_missing(
    grid: dict[str, Any], ray_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pipeline that gives up part-way is followed by one over the items still missing:
    what arrived is kept and not run again, every item counts once, the local figures."""
    runs: list[int] = []
    monkeypatch.setattr(engines, "_ray_pipeline", _pipeline_that_gives_up(runs, deliver=3))
    args = {**grid, "models": grid["models"][:1], "configs": ["cpu"], "reference": "cpu"}
    report = offload.sweep(**args, engine="ray", workers=2, shard_size=100)
    assert runs == [1000, 700] and report.retried_shards == 7
    row = report.row("plain.tflite", "cpu")
    assert row.status == "ok" and row.items == 1000 and row.failed_items == 0
    assert report.duplicates_dropped == 0
    assert figures(report) == figures(offload.sweep(**args, workers=1))


def test_pipeline_failing_every_time_fails_only_what_is_missing(
    grid: dict[str, Any], ray_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After MAX_ATTEMPTS pipelines the items never delivered fail with the reason; the
    ones that arrived keep their figures."""
    runs: list[int] = []
    gives_up = _pipeline_that_gives_up(runs, deliver=2, then="raise")
    monkeypatch.setattr(engines, "_ray_pipeline", gives_up)
    args = {**grid, "models": grid["models"][:1], "configs": ["cpu"], "reference": "cpu"}
    report = offload.sweep(**args, engine="ray", workers=2, shard_size=100)
    assert runs == [1000, 800, 800] and len(runs) == MAX_ATTEMPTS
    row = report.row("plain.tflite", "cpu")
    assert row.status == "ok" and row.items == 200 and row.failed_items == 800
    (failure,) = row.failures
    assert failure.startswith("800 x Ray Data failed: RuntimeError: the node holding its")
    assert f"{MAX_ATTEMPTS} pipelines ran, none delivered this item" in failure

"""`offload sweep --engine ray` on a real cluster that loses a node part-way.

Two nodes on this machine, started as an operator starts them (``ray start --head``, then
``ray start --address``; see ``_cluster``), each a raylet with one CPU, its own object store
and workers. The sweep runs from the command line with ``--ray-address``, one actor per node;
once the second node's actor has delivered a shard and is in the middle of the next, every
process of that node is killed with SIGKILL (raylet, workers, agents, the ``ray start``
process: a machine losing power). Every row must still come back once, whole, with the
figures the local engine gives.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import offload
from tests._sweep_models import colour_classifier, image_folder
from tests.ray._cluster import ClusterError, LocalCluster
from tests.ray._paced_delegate import MARKS_ENV
from tests.test_sweep import FIGURES

pytest.importorskip("PIL.Image", reason="pillow is not installed (pip install offload[tools])")
if not sys.platform.startswith("linux"):
    pytest.skip("the two-node cluster is set up for Linux only", allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]
ITEMS = 240
SHARD = 20
# Each invoke of the paced delegate sleeps this long, so that the sweep is still running
# when the node goes (about 2 s of work in all), whatever the machine's speed.
PACED = "tests.ray._paced_delegate:pause_ms=4"
CONFIGS = ["cpu", PACED]
# The second node goes once its actor has run a shard and half the next (the +1: its first
# invoke is a warm-up).
KILL_AFTER_INVOKES = SHARD + SHARD // 2 + 1
# The bound on the sweep (it takes about 15 s): a hang fails the test instead of stopping it.
DRIVER_TIMEOUT_S = 90.0


@pytest.fixture
def cluster() -> Iterator[dict[str, Any]]:
    """A head and one more node, stopped at the end whatever happened (the marks folder is
    where the paced delegate counts each worker's invokes)."""
    # Ray's socket paths must fit in 107 bytes: a short folder of our own, not tmp_path.
    root = Path(tempfile.mkdtemp(prefix="offload-ray-", dir="/tmp"))
    marks = root / "marks"
    marks.mkdir()
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    cluster = LocalCluster(root, {"PYTHONPATH": path, MARKS_ENV: str(marks)})
    try:
        try:
            cluster.start_head()
            node = cluster.add_node()
        except ClusterError as exc:
            pytest.skip(f"a Ray cluster cannot start here: {exc}")
        yield {"cluster": cluster, "node": node, "marks": marks, "root": root}
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def _counts(marks: Path) -> dict[int, int]:
    """Invokes of the paced delegate so far, per worker process."""
    return {int(p.name): p.stat().st_size for p in marks.iterdir()}


def _rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["model"], r["config"], *(r[k] for k in FIGURES)) for r in rows]


def test_sweep_survives_losing_a_node(cluster: dict[str, Any]) -> None:
    """A node killed mid-shard loses nothing: every row once, whole, the local figures."""
    root, marks, node = cluster["root"], cluster["marks"], cluster["node"]
    models = [
        colour_classifier(root / "shift25.tflite", shift=0.25),
        colour_classifier(root / "shift50.tflite", shift=0.5),
    ]
    image_folder(root / "images", ITEMS)
    data = ["--images", str(root / "images"), "--labels", str(root / "images_labels.txt")]
    configs = [arg for c in CONFIGS for arg in ("-c", c)]
    command = [
        *(sys.executable, "-m", "offload", "sweep", *map(str, models), *configs, *data),
        *("--reference", "cpu", "--engine", "ray", "--ray-address", cluster["cluster"].address),
        *("--workers", "2", "--shard-size", str(SHARD), "--json"),
    ]
    driver = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cluster["cluster"].driver_env(),
        cwd=REPO,
    )
    try:
        # Wait for the second node's actor to be mid-shard, then take the whole node down.
        deadline = time.monotonic() + DRIVER_TIMEOUT_S
        at_kill: dict[int, int] = {}
        killed: dict[int, int] = {}
        while time.monotonic() < deadline and driver.poll() is None:
            counts = _counts(marks)
            far = {pid for pid, n in counts.items() if n >= KILL_AFTER_INVOKES}
            if far & set(node.processes()):
                killed = node.kill()
                at_kill = counts
                break
            time.sleep(0.02)
        running = driver.poll() is None
        out, err = driver.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(timeout=10)
    log = err.decode(errors="replace")[-3000:]
    assert at_kill and running, f"the node was not killed while the sweep ran; stderr:\n{log}"
    assert not node.processes(), "a process of the killed node survived SIGKILL"
    assert sum(at_kill.values()) < 2 * ITEMS, "the sweep was nearly done: no test of loss"
    assert driver.returncode == 0, log
    report = json.loads(out)  # stdout is the report alone, Ray's notices went to stderr

    # Every row once, whole: nothing lost with the node, nothing counted twice.
    rows = report["rows"]
    assert [(Path(r["model"]).name, r["config"]) for r in rows] == [
        (m.name, c) for m in models for c in CONFIGS
    ]
    for row in rows:
        assert (row["status"], row["items"], row["failed_items"]) == ("ok", ITEMS, 0), row
    # The killed node's actor delivered a shard before it went, and that result was kept.
    assert any(int(w.rsplit(":", 1)[1]) in killed for w in report["shards_per_worker"])

    # The figures the local engine gives, on the same data, in this process.
    local = offload.sweep(
        models,
        CONFIGS,
        images=root / "images",
        labels=root / "images_labels.txt",
        reference="cpu",
        workers=1,
        shard_size=SHARD,
    )
    assert _rows(rows) == _rows(local.to_dict()["rows"])

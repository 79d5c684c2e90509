"""`offload sweep` / offload.sweep on the local engine: figures, data sets, bad input, output,
a killed worker. The Ray engine is in tests/ray/."""

from __future__ import annotations

import csv
import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest

import offload
from offload._cli import main
from offload._config_spec import parse_config_spec
from offload._sweep_engines import MAX_ATTEMPTS
from offload._sweep_report import Collector, ModelEntry
from offload._sweep_worker import ConfigInfo, SweepShard
from offload.errors import UsageError
from offload.tools import _sweep as sweep_command
from tests._models import FIXTURES
from tests._sweep_models import colour_classifier, image_folder

FIGURES = (
    "status",
    "items",
    "failed_items",
    "top1",
    "top5",
    "top1_agreement",
    "max_error",
    "mean_error",
    "max_relative_error",
    "max_steps",
    "mean_steps",
)


def figures(report: offload.SweepReport) -> list[tuple]:
    return [(r.model, r.config, *(getattr(r, k) for k in FIGURES)) for r in report.rows]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("sweep-models")
    return [
        colour_classifier(folder / "plain.tflite"),
        colour_classifier(folder / "shifted.tflite", shift=0.25),
    ]


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    pytest.importorskip("PIL.Image")
    folder = tmp_path_factory.mktemp("sweep-data") / "images"
    image_folder(folder, 40)
    return folder, folder.parent / "images_labels.txt"


def test_config_spec_syntax() -> None:
    """A spec is name[:key=value,...], several joined by '+'; cpu/auto/default stand alone."""
    spec = parse_config_spec("openvino:num_threads=1,device=CPU+litert")
    assert spec.kind == "delegates"
    assert spec.pairs() == [("openvino", {"num_threads": "1", "device": "CPU"}), ("litert", {})]
    assert parse_config_spec(" cpu ").kind == "cpu"
    for bad in ("", "litert:", "litert:num_threads", "cpu+litert", "auto:budget=1", "a:=1"):
        with pytest.raises(UsageError, match="expected"):
            parse_config_spec(bad)


def test_serial_sweep_figures(models: list[Path], images: tuple[Path, Path]) -> None:
    """With labels: accuracy per row; the reference row is marked; others agree with it."""
    folder, labels = images
    report = offload.sweep(
        models, ["cpu", "dummy"], images=folder, labels=labels, reference="cpu", workers=1
    )
    assert [(Path(r.model).name, r.config) for r in report.rows] == [
        ("plain.tflite", "cpu"),
        ("plain.tflite", "dummy"),
        ("shifted.tflite", "cpu"),
        ("shifted.tflite", "dummy"),
    ]
    truth = [int(v) for v in labels.read_text().split()]
    for r in report.rows:
        assert r.status == "ok", r.reason
        assert r.items == 40 and r.failed_items == 0
        assert r.top1 == pytest.approx(np.mean([k % 10 != 0 for k in range(40)]))
        assert r.top5 is not None and r.top5 >= r.top1
        assert r.top1_agreement == 1.0 and r.max_relative_error < 1e-5
        assert r.p50_ms > 0 and r.p90_ms >= r.p50_ms and r.throughput > 0 and r.init_ms > 0
        assert r.memory_bytes > 0 and r.workers == 1
    assert report.row("plain.tflite", "cpu").reference
    assert report.row("plain.tflite", "dummy").nodes == {"dummy": 0, "cpu": 2}  # no ADD
    assert report.row("shifted.tflite", "dummy").nodes == {"dummy": 1, "cpu": 2}
    assert len(truth) == 40 and report.has_labels and "per worker" in report.latency_note


def test_bad_inputs_are_rows(models: list[Path], images: tuple[Path, Path], tmp_path: Path) -> None:
    """An unreadable image, a model that does not load and an unavailable configuration are
    each reported in their rows with the reason; everything else completes."""
    folder, labels = images
    broken = tmp_path / "images"
    broken.mkdir()
    for p in sorted(folder.iterdir())[:6]:
        (broken / p.name).write_bytes(p.read_bytes())
    (broken / "00003.png").write_bytes(b"not a png")
    bad_model = tmp_path / "bad.tflite"
    bad_model.write_bytes(b"\0" * 64)
    report = offload.sweep(
        [models[0], bad_model],
        ["cpu", "no_such_delegate"],
        images=broken,
        labels=labels,
        reference="cpu",
        workers=1,
    )
    ok = report.row("plain.tflite", "cpu")
    assert ok.status == "ok" and ok.items == 5 and ok.failed_items == 1
    assert "00003.png" in ok.failures[0] and "cannot read the image" in ok.failures[0]
    missing = report.row("plain.tflite", "no_such_delegate")
    assert missing.status == "unavailable" and "no delegate named" in missing.reason
    for config in ("cpu", "no_such_delegate"):
        row = report.row("bad.tflite", config)
        assert row.status == "failed" and row.reason.startswith("model did not load")
    text = report.format_text()
    assert "00003.png" in text and "no_such_delegate" in text


def test_bad_arguments_are_typed(models: list[Path], tmp_path: Path) -> None:
    """Bad arguments raise UsageError saying what was expected and what was found."""
    cases = [
        ({"configs": ["cpu"]}, "expected exactly one of images"),
        ({"configs": ["cpu"], "random": 4, "workers": 0}, "workers: expected a number >= 1"),
        ({"configs": ["litert:num_threads=x"], "random": 4}, "num_threads"),
        ({"configs": ["cpu", "cpu"], "random": 4}, "repeated"),
        ({"configs": ["cpu"], "random": 4, "engine": "spark"}, "engine: expected"),
        ({"configs": ["cpu"], "npz": tmp_path / "none.npz"}, "expected a file"),
    ]
    for kwargs, message in cases:
        with pytest.raises(UsageError, match=message):
            offload.sweep(models[0], reference="cpu", **{"workers": 1, **kwargs})
    with pytest.raises(UsageError, match="expected a .tflite file or a folder"):
        offload.sweep(tmp_path / "nothing.tflite", random=2)


def test_ray_missing_names_the_extra(models: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """--engine ray without Ray installed is a UsageError naming offload[ray]."""
    import builtins

    real_import = builtins.__import__

    def no_ray(name: str, *args: object, **kwargs: object) -> object:
        if name == "ray" or name.startswith("ray."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(UsageError, match=r"offload\[ray\]"):
        offload.sweep(models[0], random=2, reference="cpu", engine="ray")


def test_npz_and_random_data(models: list[Path], tmp_path: Path) -> None:
    """An .npz feeds its rows (labels from its 'labels' array); --random is seeded per item."""
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (12, 1, 8, 8, 3)).astype(np.float32)
    np.savez(tmp_path / "d.npz", image=x, labels=np.arange(12) % 10)
    report = offload.sweep(models[0], npz=tmp_path / "d.npz", reference="cpu", workers=1)
    row = report.row("plain.tflite", "cpu")
    assert row.items == 12 and row.top1 is not None and report.has_labels
    one = offload.sweep(models[0], random=9, seed=3, reference="cpu", workers=1, shard_size=2)
    two = offload.sweep(models[0], random=9, seed=3, reference="cpu", workers=1, shard_size=9)
    assert figures(one) == figures(two) and one.rows[0].top1 is None


def test_cli_outputs(models: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """offload sweep prints a table, or JSON; writes CSV and an HTML page with embedded plots
    and links to each row's partition map."""
    pytest.importorskip("matplotlib")
    argv = ["sweep", *map(str, models), "-c", "cpu", "-c", "dummy", "--random", "16"]
    argv += ["--reference", "cpu", "--workers", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "shifted.tflite" in out and "top1" in out and "per worker" in out
    html_path, csv_path = tmp_path / "r.html", tmp_path / "r.csv"
    assert main([*argv, "--json", "--csv", str(csv_path), "--html", str(html_path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [r["config"] for r in report["rows"]] == ["cpu", "dummy", "cpu", "dummy"]
    assert report["rows"][1]["top1_agreement"] == 1.0 and report["engine"] == "local"
    with csv_path.open() as fh:
        assert len(list(csv.DictReader(fh))) == 4
    page = html_path.read_text()
    assert page.count("data:image/png;base64,") >= 2
    maps = sorted((tmp_path / "r_maps").iterdir())
    assert len(maps) == 4 and f'href="r_maps/{maps[-1].name}"' in page
    assert main(["sweep", str(models[0]), "--random", "2", "-c", "cpu,dummy"]) == 2
    assert "one configuration per --config" in capsys.readouterr().err


def test_killed_local_worker_is_retried() -> None:
    """A worker process killed mid-sweep: its shard runs again and no item counts twice."""
    model = FIXTURES / "mobilenet_v3_small_int8.tflite"  # ~5 ms an item: kills land mid-sweep
    killed: list[int] = []

    def kill_once(result: offload.SweepShard) -> None:
        if not killed:
            killed.append(result.pid)
            os.kill(result.pid, signal.SIGKILL)

    kwargs = {"random": 60, "reference": "cpu", "shard_size": 2}
    report = offload.sweep(model, workers=2, on_shard=kill_once, **kwargs)
    assert killed and report.retried_shards >= 1
    row = report.rows[0]
    assert row.status == "ok" and row.items == 60 and row.failed_items == 0
    serial = offload.sweep(model, workers=1, **kwargs)
    assert figures(report) == figures(serial)


@pytest.mark.parametrize("when", ["init", "invoke"])
def test_a_configuration_that_kills_its_worker_fails_only_its_rows(
    models: list[Path], when: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A configuration whose engine kills the worker process (at load or at invoke) fails its
    own row after MAX_ATTEMPTS deaths; the model's other configurations, and the same
    configuration on a model where it does not crash, give the figures of a sweep without it."""
    monkeypatch.setenv("OFFLOAD_DISABLE_PLUGIN_AUTOLOAD", "1")  # workers start faster
    crasher = f"tests._crash_delegate:when={when}"  # kills the process in ADD: shifted only
    kwargs = {"random": 8, "reference": "cpu", "workers": 2, "shard_size": 4}
    report = offload.sweep(models, ["cpu", crasher], **kwargs)
    row = report.row("shifted.tflite", crasher)
    assert row.status == "failed" and row.items == 0
    assert row.reason.startswith(f"worker process died {MAX_ATTEMPTS} times in this configuration")
    assert report.row("plain.tflite", crasher).status == "ok"  # no ADD: nothing to crash in
    clean = offload.sweep(models, ["cpu"], **kwargs)
    assert [f for f in figures(report) if f[1] == "cpu"] == figures(clean)
    assert all(r.status == "ok" for r in clean.rows)


def test_rows_say_why_agreement_is_missing_when_the_reference_did_not_run() -> None:
    """A reference that did not run (it killed its workers, say) leaves the other rows
    without agreement figures, and their reason says why."""
    specs = [parse_config_spec("litert"), parse_config_spec("cpu")]
    collector = Collector([ModelEntry("m.tflite", "float32")], specs, 0)
    died = "worker process died 3 times in this configuration"
    infos = [ConfigInfo("failed", died), ConfigInfo("ok", "", 0.001, 64, [], {"cpu": 2})]
    figures = [{"error": died}, {"error": None, "latency_s": 0.001, "top": [1]}]
    collector(SweepShard(0, "host:1", 1, 1, infos, [(0, None, figures)]))
    ref, cpu = collector.rows(1)
    assert ref.status == "failed" and ref.reason == died
    assert cpu.status == "ok" and cpu.items == 1 and cpu.top1_agreement is None
    assert cpu.reason == f"no agreement figures: the reference 'litert' did not run ({died})"


def test_cli_stdout_is_the_report_alone(
    models: list[Path], capfd: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What is printed while the sweep runs (Ray's notices of a retried task or a lost node,
    an engine writing from native code) goes to stderr: stdout is the report alone."""
    real = sweep_command.sweep

    def chatty(*args: object, **kwargs: object) -> offload.SweepReport:
        print("(raylet) a task will be retried")
        os.write(1, b"native chatter\n")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sweep_command, "sweep", chatty)
    argv = ["sweep", str(models[0]), "--random", "3", "--reference", "cpu", "--workers", "1"]
    assert main([*argv, "--json"]) == 0
    out, err = capfd.readouterr()
    assert json.loads(out)["num_items"] == 3
    assert "a task will be retried" in err and "native chatter" in err


def test_an_auto_configuration_checks_its_candidates_on_the_data(
    models: list[Path], tmp_path: Path
) -> None:
    """The first items of the data set are auto's own samples: an 'auto' configuration is
    given them as auto_inputs, in input order, as the rows will feed them."""
    from offload import _sweep
    from offload._sweep_data import DataSpec, Item
    from offload._sweep_worker import ModelRunner, ModelTask

    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (5, 1, 8, 8, 3)).astype(np.float32)
    items = tuple(Item(k, arrays=(("image", x[k]),)) for k in range(_sweep.AUTO_SAMPLES))
    spec = parse_config_spec("auto")
    task = ModelTask(0, str(models[0]), (spec,), 0, DataSpec("npz"), auto_samples=items)
    runner = ModelRunner(task)
    samples = runner._auto_samples()
    assert samples is not None and len(samples) == _sweep.AUTO_SAMPLES
    np.testing.assert_array_equal(samples[1][0], x[1])
    auto = runner.interpreters[0].auto_selection
    assert auto["gate"]["samples"] == _sweep.AUTO_SAMPLES
    assert auto["gate"]["inputs"][-1] == f"sample {_sweep.AUTO_SAMPLES - 1}"

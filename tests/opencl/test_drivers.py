"""Every kernel on every usable OpenCL platform here, not only on the one chosen by default.

Two drivers compile the same OpenCL C differently: Debian's PoCL 3.1 (``pocl-opencl-icd``,
which scripts/ensure_opencl.sh installs) turned softmax_rows into a segmentation fault that
pip's PoCL 3.0 ran correctly. The rest of tests/opencl runs on the default platform (the
first; Debian's where both are installed); this runs the kernel tests again, both families,
once per other usable platform, in a child process shown only that platform, so that a driver
crash fails this test instead of ending the run. With one platform it skips, saying so.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from offload_gpu_opencl import _device
from offload_gpu_opencl._errors import GpuOpenCLError

HERE = Path(__file__).resolve().parent
# The kernel tests: the GPU family (tiles, split-K, softmax_rows, mean_hw, whole models) and
# the CPU family's op, edge-value, launch-shape, fusion and LSTM tests. Left out: the
# autotuner's and the caches' bookkeeping and the tests that run children of their own,
# which no driver changes and which would double the time (about 90 s on a cold PoCL cache
# on 2 cores, 15 s warm).
KERNEL_TESTS = [
    "test_gpu_family.py",
    "test_ops.py",
    "test_edge_values.py",
    "test_launch_shapes.py",
    "test_fusion.py",
    "test_lstm.py",
]
DESELECT = "not autotuner"


def _platform_label(platform: object) -> str:
    return "_".join(str(getattr(platform, "version", "")).split()[2:4]) or "unnamed"


def other_platforms() -> list[tuple[int, str]]:
    """(index, label) of each usable platform besides the one the plugin opens by default."""
    if os.environ.get("OFFLOAD_TEST_OPENCL_PLATFORM"):
        return []  # a child already confined to one platform
    try:
        default = _device.open_device(None, None).platform
    except GpuOpenCLError:
        return []
    found = []
    for index in sorted({pi for pi, _, _, _ in _device.list_devices()}):
        try:
            handle = _device.open_device(index, None)
        except GpuOpenCLError:  # its compiler fails here: the plugin would skip it too
            continue
        if handle.platform != default:
            found.append((index, _platform_label(handle.platform)))
    return found


def _cases() -> list:
    others = other_platforms()
    if not others:
        reason = (
            "one usable OpenCL platform here: the other tests ran every kernel on it "
            "(where Debian's PoCL, pocl-opencl-icd, is installed beside pip's, both are run)"
        )
        return [pytest.param(None, "", marks=pytest.mark.skip(reason=reason), id="one_platform")]
    return [pytest.param(i, label, id=f"platform{i}-{label}") for i, label in others]


@pytest.mark.litert
@pytest.mark.starts_run  # 2-3 minutes on a cold PoCL cache
@pytest.mark.parametrize(("index", "label"), _cases())
def test_kernels_pass_on_every_other_platform(index: int, label: str) -> None:
    """The kernel tests pass, and do not crash, on each platform besides the default one."""
    env = {**os.environ, "OFFLOAD_TEST_OPENCL_PLATFORM": str(index)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", DESELECT]
    proc = subprocess.run(
        [*command, *(str(HERE / name) for name in KERNEL_TESTS)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=HERE.parents[1],
        env=env,
    )
    tail = f"\nstdout:\n{proc.stdout[-6000:]}\nstderr:\n{proc.stderr[-3000:]}"
    where = f"platform {index} ({label})"
    assert proc.returncode >= 0, f"the tests on {where} died of signal {-proc.returncode}{tail}"
    assert proc.returncode == 0, f"the tests failed on {where}{tail}"
    passed = re.search(r"(\d+) passed", proc.stdout)
    assert passed and int(passed.group(1)) > 0, f"nothing ran on {where}{tail}"

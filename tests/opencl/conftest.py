"""Shared fixtures for tests that need an OpenCL platform (PoCL or a vendor driver).

Every test here is marked ``opencl`` and skips, with the reason, when pyopencl finds no device.
Compiled state is shared: the plugin memoises its built program per device and precision for
the whole process, and the cache tests share one serialization directory per module.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("pyopencl", reason="pyopencl is not installed")
gpu = pytest.importorskip("offload_gpu_opencl", reason="offload-gpu-opencl is not installed")

# OFFLOAD_TEST_OPENCL_PLATFORM=<index> shows the plugin only that platform's devices, so that
# every default choice lands on it: test_drivers.py runs the GPU-family tests so on each
# platform besides the default one (Debian's PoCL and pip's both register as "Portable
# Computing Language", so an index is what tells them apart). Set before the probe below.
PLATFORM = os.environ.get("OFFLOAD_TEST_OPENCL_PLATFORM", "").strip()
if PLATFORM:
    from offload_gpu_opencl import _device

    _all_devices = _device.list_devices
    _device.list_devices = lambda: [e for e in _all_devices() if str(e[0]) == PLATFORM]

_REASON = gpu.GpuOpenCLDelegate.availability().reason


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.opencl)
            if _REASON:
                item.add_marker(pytest.mark.skip(reason=f"no OpenCL device: {_REASON}"))

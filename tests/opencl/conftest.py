"""Shared fixtures for tests that need an OpenCL platform (PoCL or a vendor driver).

Every test here is marked ``opencl`` and skips, with the reason, when pyopencl finds no device.
Compiled state is shared: the plugin memoises its built program per device and precision for
the whole process, and the cache tests share one serialization directory per module.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyopencl", reason="pyopencl is not installed")
gpu = pytest.importorskip("offload_gpu_opencl", reason="offload-gpu-opencl is not installed")

_REASON = gpu.GpuOpenCLDelegate.availability().reason


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.opencl)
            if _REASON:
                item.add_marker(pytest.mark.skip(reason=f"no OpenCL device: {_REASON}"))

"""Device choice: a device is usable only if its compiler builds a kernel."""

from __future__ import annotations

import pytest

from offload_gpu_opencl import _device
from offload_gpu_opencl._errors import GpuOpenCLError


@pytest.fixture
def fresh_device_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_device, "_DEVICES", {})
    monkeypatch.setattr(_device, "_UNUSABLE", {})


def test_device_whose_compiler_fails_is_skipped_with_its_error(
    fresh_device_memo: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When every device's compiler rejects the probe kernel, opening fails with each
    device named and the compiler's own error, and probe() reports that as the reason."""
    monkeypatch.setattr(_device, "_PROBE_SOURCE", "__kernel void broken( { }")
    with pytest.raises(GpuOpenCLError, match="compiler fails on a trivial kernel") as info:
        _device.open_device(None, None)
    names = {d.name.strip() for _, _, _, d in _device.list_devices()}
    assert any(name in str(info.value) for name in names)
    assert "compiler fails" in (_device.probe() or "")


def test_usable_device_is_memoised(fresh_device_memo: None) -> None:
    """A device that builds the probe is opened once and shared."""
    first = _device.open_device(None, None)
    assert _device.open_device(None, None) is first

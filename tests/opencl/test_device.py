"""Device choice: a device is usable only if its compiler builds a kernel."""

from __future__ import annotations

import numpy as np
import pyopencl as cl
import pytest

from offload_gpu_opencl import _device
from offload_gpu_opencl._errors import GpuOpenCLError
from offload_gpu_opencl._replay import COMMAND_BUFFER_EXTENSION, make_launcher


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


def test_launches_recorded_once_replay_in_order_on_every_device() -> None:
    """On each device: three launches recorded (where the driver has cl_khr_command_buffer) or
    called directly run in order, once per enqueue, with no wait between two enqueues (a
    command buffer still pending is waited for, not refused). A device without the extension
    refuses a command buffer asked for by name, naming it; auto takes pyopencl's launches on
    a CPU device."""
    source = (
        "__kernel void advance(__global float* x, float k) "
        "{ const int i = get_global_id(0); x[i] = x[i] * k + 1.0f; }"
    )
    for p_index, _plat, d_index, dev in _device.list_devices():
        handle = _device.open_device(p_index, d_index)
        kernel = cl.Kernel(cl.Program(handle.context, source).build(), "advance")
        data = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, 64 * 4)
        kernel.set_args(data, np.float32(2))
        launches = [(kernel, (64,), (16,))] * 3
        modes = ["direct"]
        if COMMAND_BUFFER_EXTENSION in dev.extensions.split():
            modes.append("command_buffer")
        else:
            with pytest.raises(GpuOpenCLError, match=COMMAND_BUFFER_EXTENSION):
                make_launcher("command_buffer", handle.queue, launches, 0)
        for mode in modes:
            launcher = make_launcher(mode, handle.queue, launches, 0)
            assert launcher.mode == mode
            cl.enqueue_fill_buffer(handle.queue, data, np.float32(0), 0, 64 * 4)
            launcher.enqueue()
            launcher.enqueue()
            out = np.empty(64, np.float32)
            cl.enqueue_copy(handle.queue, out, data)
            # x -> 2x + 1, six times from 0: 63 only if the six ran in order.
            np.testing.assert_array_equal(out, np.full(64, 63, np.float32), err_msg=mode)
        if dev.type & cl.device_type.CPU:
            auto = make_launcher("auto", handle.queue, launches, 0)
            assert auto.mode == "pyopencl" and "CPU device" in auto.reason

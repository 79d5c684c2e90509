"""The roofs of an OpenCL device, measured by its own kernels (``GpuKernel.device_peak``).

Two micro-benchmarks, timed by the device's own timestamps (a profiling queue), best of a few:

* ``peak_fma`` / ``peak_mad``: float32 multiply-adds in registers (the faster of the two
  builtins), eight independent float4 chains per item (enough to hide the pipeline's latency
  on GPUs; PoCL vectorises across items), over a grid of many groups per compute unit. A
  multiply-add counts 2 FLOPs, as offload's ``node_work`` counts them.
* ``peak_copy``: a float4 copy between two buffers much larger than any cache; bytes read plus
  written, as the CPU's bandwidth is counted (offload._peak_probe).

The device's timestamps leave the launch cost out. The multiply-add kernels grow their loop
until one run takes at least ``MIN_RUN_S`` (so the device's start-up ramp does not count
either), and stop growing once a run would pass ``MAX_RUN_S``, however slow the device.
Measured once per device and driver in a process (a few tenths of a second on a GPU, about a
second on PoCL).
"""

from __future__ import annotations

import threading

import numpy as np
import pyopencl as cl

from offload import DevicePeak
from offload_gpu_opencl._device import DeviceHandle, profiling_queue
from offload_gpu_opencl._errors import check

__all__ = ["device_peak"]

MIN_RUN_S = 0.02
MAX_RUN_S = 0.5
ROUNDS = 3
CHAINS = 8  # independent float4 chains per item
COPY_BYTES = 64 << 20  # per buffer, capped at a quarter of the largest allocation

_MAD_KERNEL = """
__kernel void peak_OP(__global float* out, float a, float b, int iters) {
    float4 x[CHAINS];
    for (int c = 0; c < CHAINS; ++c) x[c] = (float4)(get_global_id(0) + c) * 1e-6f;
    for (int i = 0; i < iters; ++i) {
        #pragma unroll
        for (int c = 0; c < CHAINS; ++c) x[c] = OP(x[c], (float4)a, (float4)b);
    }
    float4 s = (float4)0;
    for (int c = 0; c < CHAINS; ++c) s += x[c];
    out[get_global_id(0)] = s.x + s.y + s.z + s.w;
}
"""
_SOURCE = (
    "".join(_MAD_KERNEL.replace("OP", op).replace("CHAINS", str(CHAINS)) for op in ("fma", "mad"))
    + """
__kernel void peak_copy(__global const float4* src, __global float4* dst) {
    dst[get_global_id(0)] = src[get_global_id(0)];
}
"""
)

_LOCK = threading.Lock()
_MEMO: dict[tuple[str, str], DevicePeak] = {}


def device_peak(handle: DeviceHandle) -> DevicePeak:
    """The device's float32 multiply-add and memory roofs (measured now, or this process's
    earlier measurement of the same device and driver)."""
    key = (handle.name, handle.driver)
    with _LOCK:
        known = _MEMO.get(key)
        if known is not None:
            return known.model_copy(update={"source": "measured earlier in this process"})
        program = check("clBuildProgram(peak)", cl.Program(handle.context, _SOURCE).build)
        queue = profiling_queue(handle)
        peak = DevicePeak(
            device=handle.name,
            gflops=_mad_gflops(handle, program, queue),
            gbps=_copy_gbps(handle, program, queue),
            source="measured now by gpu_opencl's kernels (float32)",
        )
        _MEMO[key] = peak
        return peak


def _seconds(queue: cl.CommandQueue, kernel: cl.Kernel, size: int, group: int | None) -> float:
    """Device seconds of one launch of ``kernel`` over ``size`` items (best of ROUNDS)."""
    local = None if group is None else (group,)
    best = float("inf")
    for _ in range(ROUNDS):
        event = cl.enqueue_nd_range_kernel(queue, kernel, (size,), local)
        event.wait()
        best = min(best, (int(event.profile.end) - int(event.profile.start)) * 1e-9)
    return max(best, 1e-9)


def _mad_gflops(handle: DeviceHandle, program: cl.Program, queue: cl.CommandQueue) -> float:
    """The faster of fma() and mad(): fma is the fused instruction where the hardware has one
    (PoCL on an AVX-512 CPU: 85 against 37-64 GFLOP/s), mad where fma is emulated (pip's
    generic PoCL: 12 against 9)."""
    device = handle.device
    group = min(256, int(device.max_work_group_size))
    size = int(device.max_compute_units) * group * 16
    out = cl.Buffer(handle.context, cl.mem_flags.WRITE_ONLY, size * 4)
    best = 0.0
    for name in ("peak_fma", "peak_mad"):
        kernel = cl.Kernel(program, name)
        iters = 64
        while True:
            kernel.set_args(out, np.float32(0.999), np.float32(1e-3), np.int32(iters))
            took = _seconds(queue, kernel, size, group)
            if took >= MIN_RUN_S or took * 2 > MAX_RUN_S or iters >= 1 << 24:
                break
            iters *= max(2, min(64, int(MIN_RUN_S / took)))
        best = max(best, size * iters * CHAINS * 4 * 2 / took / 1e9)
    return best


def _copy_gbps(handle: DeviceHandle, program: cl.Program, queue: cl.CommandQueue) -> float:
    device = handle.device
    nbytes = min(COPY_BYTES, int(device.max_mem_alloc_size) // 4)
    nbytes -= nbytes % 16
    mf = cl.mem_flags
    src = cl.Buffer(handle.context, mf.READ_WRITE, nbytes)
    dst = cl.Buffer(handle.context, mf.READ_WRITE, nbytes)
    cl.enqueue_fill_buffer(queue, src, np.ones(1, np.float32), 0, nbytes)
    kernel = cl.Kernel(program, "peak_copy")
    kernel.set_args(src, dst)
    took = _seconds(queue, kernel, nbytes // 16, None)
    return 2 * nbytes / took / 1e9

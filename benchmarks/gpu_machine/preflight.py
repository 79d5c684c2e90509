"""Before the benchmark on a GPU machine: can gpu_opencl build its program there, and at what
cost per kernel? Writes a report (stdout) that says, for the device gpu_opencl picks:

- the device's limits that shape the kernels (compute units, group size, local memory, fp16);
- build time of the whole program in float32 and half storage, GPU family included, and on a
  failure the compiler's log (the benchmark's own message is cut to one line);
- per tiled kernel: the driver's work-group limit, private (spilled) and local memory;
- on NVIDIA, ``-cl-nv-verbose``'s ptxas lines (registers and spills per kernel);
- the launch floor: device time of an empty kernel (profiling events), and wall time per
  launch of 2000 back-to-back enqueues (what a partition of many small kernels pays).

    python benchmarks/gpu_machine/preflight.py > preflight.log
"""

from __future__ import annotations

import os
import sys
import time

import pyopencl as cl


def main() -> int:
    from offload_gpu_opencl._device import open_device
    from offload_gpu_opencl._source import program_source
    from offload_gpu_opencl._tiling import TILE_LIST, family_options

    handle = open_device(None, None)
    dev = handle.device
    print(f"device: {handle.name} ({cl.device_type.to_string(dev.type)}); {handle.driver}")
    print(
        f"compute units {dev.max_compute_units}, max group {dev.max_work_group_size}, local "
        f"{dev.local_mem_size} B, fp16 {handle.has_fp16}, "
        f"preferred multiple {_preferred_multiple(handle)}"
    )
    nvidia = "nvidia" in handle.platform.name.lower()
    failed = False
    for half in (False, True):
        options = (["-DSTORE_HALF"] if half else []) + family_options(
            os.environ.get("KERNEL_FAMILY", "auto"), dev
        )
        if handle.plain_access:
            options.append("-DPLAIN_ACCESS")
        verbose = options + (["-cl-nv-verbose"] if nvidia else [])
        t0 = time.perf_counter()
        try:
            program = cl.Program(handle.context, program_source()).build(options=" ".join(verbose))
        except cl.Error as exc:
            failed = True
            print(f"\nbuild {' '.join(options)} FAILED after {time.perf_counter() - t0:.1f} s:")
            print(str(exc)[:20000])
            continue
        took = time.perf_counter() - t0
        print(f"\nbuild {' '.join(options) or '(float32, cpu family)'}: {took:.1f} s")
        log = program.get_build_info(dev, cl.program_build_info.LOG) or ""
        lines = [ln for ln in log.splitlines() if "ptxas" in ln or "warning" in ln.lower()]
        print("\n".join(lines[:400]))
        if "-DTILED_GEMM" not in options:
            continue
        for tile in TILE_LIST:
            for kind in ("gemm", "conv"):
                kernel = cl.Kernel(program, f"t{kind}_{tile.name}")
                info = cl.kernel_work_group_info
                group, private, local = (
                    kernel.get_work_group_info(what, dev)
                    for what in (info.WORK_GROUP_SIZE, info.PRIVATE_MEM_SIZE, info.LOCAL_MEM_SIZE)
                )
                print(
                    f"t{kind}_{tile.name}: max group {group}, private {private} B, local {local} B"
                )
    launch_floor(handle)
    return 1 if failed else 0


def launch_floor(handle) -> None:
    import numpy as np

    from offload_gpu_opencl._replay import COMMAND_BUFFER_EXTENSION, make_launcher

    has = COMMAND_BUFFER_EXTENSION in handle.device.extensions.split()
    print(f"\n{COMMAND_BUFFER_EXTENSION}: {'yes' if has else 'no'}")
    print(f"extensions: {handle.device.extensions.strip()}")

    ctx, dev = handle.context, handle.device
    src = (
        "__kernel void nop(__global float* x, int n) "
        "{ int i = get_global_id(0); if (i < n) x[i] += 1.0f; }"
    )
    program = cl.Program(ctx, src).build()
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 << 20)
    profiled = cl.CommandQueue(ctx, dev, properties=cl.command_queue_properties.PROFILING_ENABLE)
    for n in (64, 1 << 20):
        kernel = cl.Kernel(program, "nop")
        kernel.set_args(buf, np.int32(n))
        size = -(-n // 64) * 64
        for queue, label in ((handle.queue, "plain queue"), (profiled, "profiling queue")):
            for _ in range(200):
                cl.enqueue_nd_range_kernel(queue, kernel, (size,), (64,))
            queue.finish()
            t0 = time.perf_counter()
            events = [
                cl.enqueue_nd_range_kernel(queue, kernel, (size,), (64,)) for _ in range(2000)
            ]
            queue.finish()
            wall = (time.perf_counter() - t0) / 2000 * 1e6
            device = (
                sorted(e.profile.end - e.profile.start for e in events)[1000] / 1e3
                if queue is profiled
                else float("nan")
            )
            print(
                f"launch floor, {n} items, {label}: {wall:.2f} us wall per launch, "
                f"median device {device:.2f} us"
            )
        # The same 2000 launches through each of gpu_opencl's enqueue modes (_replay), as one
        # invoke: what a model's launches cost the host in each.
        for mode in ("pyopencl", "direct", "command_buffer"):
            try:
                launcher = make_launcher(mode, handle.queue, [(kernel, (size,), (64,))] * 2000, 0)
            except Exception as exc:
                print(f"enqueue {mode}: unavailable ({exc})")
                continue
            launcher.enqueue()
            handle.queue.finish()
            t0 = time.perf_counter()
            launcher.enqueue()
            handle.queue.finish()
            wall = (time.perf_counter() - t0) / 2000 * 1e6
            print(f"launch floor, {n} items, enqueue {mode}: {wall:.2f} us wall per launch")


def _preferred_multiple(handle) -> int | str:
    try:
        kernel = cl.Kernel(
            cl.Program(handle.context, "__kernel void k(__global float* x) { x[0] = 1; }").build(),
            "k",
        )
        info = cl.kernel_work_group_info.PREFERRED_WORK_GROUP_SIZE_MULTIPLE
        return kernel.get_work_group_info(info, handle.device)
    except cl.Error as exc:
        return f"? ({exc})"


if __name__ == "__main__":
    sys.exit(main())

"""Before the benchmark on a GPU machine: can gpu_opencl build its program there, and at what
cost per kernel? Writes a report (stdout) that says, for the device gpu_opencl picks:

- the device's limits that shape the kernels (compute units, group size, local memory, fp16);
- build time of the whole program in float32 and half storage, GPU family included, and on a
  failure the compiler's log (the benchmark's own message is cut to one line);
- per tiled kernel: the driver's work-group limit, private (spilled) and local memory;
- on NVIDIA, ``-cl-nv-verbose``'s ptxas lines (registers and spills per kernel).

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
    return 1 if failed else 0


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

"""Which depthwise -> 1x1 pairs gain from gpu_opencl's ``fuse_depthwise``, pair by pair.

For each model, gpu_opencl f32 runs twice in one process, every pair fused (each fused product
with the tile the autotuner times for it) and none, with profiling on; every launch's device
time is kept (the median over the profiled invokes) and matched to its node. Per pair it prints
the product's shape, its tile, the depthwise launch's and the product's device times unfused,
the fused launch's, and the model's launch cost beyond device time ((wall - device busy) /
launches, unprofiled), which a fused pair saves once. A diagnostic for the fusion rule, not a
benchmark of record (device timestamps miss the gaps between dependent launches that fusion
removes; run 2 of benchmarks/RESULTS.md's session-18 section): it reads the plugin's private
lowering to name each launch's node.

    python benchmarks/gpu_machine/fusion_pairs.py MODEL.tflite... > fusion_pairs.txt
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

PROFILED = 20
WALL_SECONDS = 1.0


def main(paths: list[str]) -> int:
    import offload
    from offload_gpu_opencl import GpuOpenCLDelegate
    from offload_gpu_opencl import _kernel as kernel_module

    built: list[Any] = []
    setup = kernel_module.GpuKernel._setup
    record = kernel_module.GpuKernel._record

    def keep_setup(self: Any, lw: Any) -> None:
        setup(self, lw)
        self.diag_launches = [(launch.kernel, launch.node) for launch in lw.launches]
        self.diag_fused = dict(lw.depthwise_into)
        self.diag_times = [[] for _ in lw.launches]
        built.append(self)

    def keep_record(self: Any, events: list[Any]) -> None:
        kernels = [e for family, kind, _f, e in events if kind == "kernel" and family != "to_store"]
        for pos, event in enumerate(kernels[-len(self.diag_times) :]):
            self.diag_times[pos].append((int(event.profile.end) - int(event.profile.start)) / 1e3)
        record(self, events)

    kernel_module.GpuKernel._setup = keep_setup
    kernel_module.GpuKernel._record = keep_record
    rows = []
    for path in map(Path, paths):
        runs: dict[bool, dict[str, Any]] = {}
        for fused in (False, True):
            built.clear()
            delegate = GpuOpenCLDelegate(
                {"fuse_depthwise": fused, "kernel_family": os.environ.get("KERNEL_FAMILY", "auto")}
            )
            interp = offload.Interpreter(model_path=str(path), experimental_delegates=[delegate])
            interp.allocate_tensors()
            rng = np.random.default_rng(0)
            for d in interp.get_input_details():
                interp.set_tensor(d["index"], rng.uniform(-1, 1, d["shape"]).astype(d["dtype"]))
            for _ in range(10):
                interp.invoke()
            count, start = 0, time.perf_counter()
            while time.perf_counter() - start < WALL_SECONDS:
                interp.invoke()
                count += 1
            wall_us = (time.perf_counter() - start) / count * 1e6
            interp.set_delegate_profiling(True)
            for _ in range(PROFILED):
                interp.invoke()
            kernel = built[0]
            medians = [statistics.median(t) if t else 0.0 for t in kernel.diag_times]
            busy = sum(medians)
            runs[fused] = {
                "kernel": kernel,
                "medians": medians,
                "wall_us": wall_us,
                "gap_us": (wall_us - busy) / max(1, len(medians)),
            }
            print(
                f"{path.stem} fused={fused}: {len(medians)} launches, wall {wall_us:.1f} us, "
                f"device {busy:.1f} us, gap {runs[fused]['gap_us']:.2f} us/launch",
                flush=True,
            )
        plain, fused_run = runs[False], runs[True]
        by_node = {
            node: (name, t)
            for (name, node), t in zip(plain["kernel"].diag_launches, plain["medians"])
        }
        sg = plain["kernel"].subgraph
        for (name, node), t_fused in zip(fused_run["kernel"].diag_launches, fused_run["medians"]):
            if node not in fused_run["kernel"].diag_fused:
                continue
            dw_node = fused_run["kernel"].diag_fused[node][0]
            conv = sg.nodes[node]
            dwn = sg.nodes[dw_node]
            _, oh, ow, k = (int(v) for v in sg.tensors[conv.inputs[0]].shape)
            co = int(sg.tensors[conv.outputs[0]].shape[-1])
            _, kh, kw, _ = (int(v) for v in sg.tensors[dwn.inputs[1]].shape)
            stride = dwn.options.get("stride_h", 1)
            gemm_name, t_gemm = by_node.get(node, ("?", 0.0))
            dw_name, t_dw = by_node.get(dw_node, ("?", 0.0))
            row = {
                "model": path.stem,
                "conv": node,
                "m": oh * ow,
                "k": k,
                "co": co,
                "dw": f"{kh}x{kw}/s{stride}",
                "gemm_kernel": gemm_name,
                "fused_kernel": name,
                "dw_us": round(t_dw, 2),
                "gemm_us": round(t_gemm, 2),
                "fused_us": round(t_fused, 2),
                "delta_us": round(t_fused - t_dw - t_gemm, 2),
                "gap_us": round(plain["gap_us"], 2),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

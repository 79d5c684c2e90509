"""``offload benchmark --profile``: where each delegate's device time goes.

After the timed runs (which never profile: timestamps cost), each configuration runs
``--profile_runs`` more invokes with device profiling on (``Interpreter.set_delegate_profiling``)
and reports, per delegate, the kernel families' launches and device milliseconds per invoke,
their share of the device's busy time and, where the delegate counts the work, GFLOP/s. The
busy total next to the wall time per invoke tells launch and host overhead (a device that idles
most of the invoke) from slow kernels (a device busy all along).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

from offload.tools._bench_runs import Config
from offload.tools._common import format_table

__all__ = ["print_device_profiles", "profile_configs"]


def profile_configs(configs: Sequence[Config], runs: int) -> None:
    """Run each live configuration ``runs`` times with device profiling on; keep the report."""
    for c in configs:
        it = c.interpreter
        if it is None:
            continue
        measuring = it.set_delegate_profiling(True)
        walls = []
        try:
            for _ in range(runs if measuring else 0):
                t0 = time.perf_counter()
                it.invoke()
                walls.append(time.perf_counter() - t0)
            delegates = it.delegate_profile()
        finally:
            it.set_delegate_profiling(False)
        timed = statistics.median(c.runs) * 1e3 if c.runs else None
        c.device_profile = {
            "runs": len(walls),
            # The timed runs' median: what an invoke costs when nothing is measured.
            "wall_ms_per_invoke": timed,
            "profiled_wall_ms_per_invoke": statistics.median(walls) * 1e3 if walls else None,
            "delegates": delegates,
        }


def _busy_lines(profile: dict[str, Any], busy: float) -> list[str]:
    """The busy time beside the wall time of the same invokes: the profiled ones where there
    are (timestamps slow some drivers, so the timed runs' wall can be shorter than the busy
    time it would be compared with), else the timed runs'."""
    timed = profile["wall_ms_per_invoke"]
    profiled = profile["profiled_wall_ms_per_invoke"]
    wall, which = (profiled, "while profiling") if profiled else (timed, "(timed runs)")
    lines = [f"device busy {busy:.3f} ms per invoke"]
    if wall and busy <= wall:
        lines[0] += f" of {wall:.3f} ms wall {which}: {100 * busy / wall:.0f}%"
        lines.append(
            f"{wall - busy:.3f} ms per invoke off the device: launches, waits, "
            "host conversions, CPU nodes"
        )
    elif wall:
        # A CPU device (PoCL) runs launches side by side on its cores, so their timestamps
        # overlap and add up to more than the time that passed: not a share of anything.
        lines[0] += (
            f", more than the {wall:.3f} ms wall {which}: the device ran launches side by "
            "side (a CPU device does), so busy time is not a share of the wall"
        )
    if profiled and timed:
        lines.append(f"{timed:.3f} ms wall per invoke without profiling (median of the timed runs)")
    return lines


def print_device_profiles(result: dict[str, Any]) -> None:
    """One table per delegate of every configuration that was profiled."""
    for c in result["configs"]:
        profile = c.get("device_profile")
        if profile is None:
            continue
        runs = f" ({profile['runs']} profiled invokes)" if profile["runs"] else ""
        print(f"\nDevice profile: {c['name']}{runs}")
        if not profile["delegates"]:
            print("  no delegate partitions")
        for d in profile["delegates"]:
            where = f" on {d['device']}" if d["device"] else ""
            parts = len(d["partitions"])
            print(f"  {d['delegate']}{where}, {parts} partition(s)")
            if d["reason"]:
                print(f"    {d['reason']}")
                continue
            rows = [
                [
                    k["family"],
                    f"{k['launches_per_invoke']:.4g}",
                    f"{k['device_ms_per_invoke']:.4f}",
                    f"{k['percent']:.1f}%",
                    "" if k["gflops"] is None else f"{k['gflops']:.1f}",
                ]
                for k in d["kernels"]
            ]
            headers = ["kernel family", "launches", "device ms", "share", "GFLOP/s"]
            print(format_table(headers, rows, "    "))
            for line in _busy_lines(profile, d["device_ms_per_invoke"]):
                print("    " + line)

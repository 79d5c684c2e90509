"""``offload benchmark --roofline``: how close each plan, and each of its parts, is to the limit.

The figures are the library's (offload._roofline, offload._machine_peak); this module runs
them on the configurations that were timed and prints them. The plan's time is the mean of
the timed invokes; a part's (each delegate partition, the CPU steps together) is its share of
the same invokes, from the interpreter's step profile (``profile_report()``) read before and
after them.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from offload._delegate import DevicePeak
from offload._formatting import format_table, one_line
from offload._introspect import reported_peak
from offload._machine_peak import MachinePeak
from offload._roofline import part_name, part_times, roofline
from offload.tools._bench_runs import Config

__all__ = ["print_rooflines", "roofline_configs"]


def roofline_configs(
    configs: Sequence[Config], peak: MachinePeak, single: MachinePeak | None = None
) -> None:
    """Each timed configuration's roofline, kept on it (its summary's ``roofline``), with
    the peak at one thread beside the one used (``single_thread_peak``) where they differ."""
    for c in configs:
        it = c.interpreter
        if it is None or not c.runs:
            continue
        work = it.delegation_report()["work"]
        times = None
        if c.profile_before is not None:
            times = part_times(c.profile_before, it.profile_report(), len(c.runs), work)
        mean_ms = 1e3 * sum(c.runs) / len(c.runs)
        c.roofline = roofline(work, peak, mean_ms, times, device_peaks(it))
        if single is not None:
            c.roofline["single_thread_peak"] = single.to_dict()


def device_peaks(interp: Any) -> dict[str, DevicePeak]:
    """The roofs each delegate partition's kernel reports for its device, by partition name
    (a kernel that reports none is left out: its partition is set against the CPU's peak; one
    whose report is invalid is left out with a warning)."""
    plan = interp.plan()
    peaks: dict[str, DevicePeak] = {}
    for index, kernel in sorted(interp._executor.delegate_kernels.items()):
        name = part_name(plan.partitions[index].delegate, index)
        try:
            peak = reported_peak(kernel)
        except Exception as exc:  # a plugin's report must not end the benchmark
            warnings.warn(f"{name}: no device peak: {one_line(str(exc))}", stacklevel=2)
            continue
        if peak is not None:
            peaks[name] = peak
    return peaks


def _cell(value: float | None, digits: int = 4) -> str:
    return "" if value is None else f"{value:.{digits}g}"


def peak_line(peak: dict[str, Any], single: dict[str, Any] | None = None) -> str:
    """The roofs used and where they came from (and one thread's, where given)."""
    where = f", {peak['file']}" if peak["file"] else ""
    note = f" ({one_line(peak['note'])})" if peak["note"] else ""
    line = (
        f"Roofline: peak at {peak['threads']} thread(s) on {one_line(peak['cpu'])}: "
        f"{peak['gflops']:.1f} GFLOP/s (float32 FMA), {peak['gbps']:.2f} GB/s (memory), "
        f"ridge {peak['ridge_flops_per_byte']:.3g} FLOP/byte; {peak['source']}{where}{note}"
    )
    if single is not None:
        line += (
            f"\n  at 1 thread: {single['gflops']:.1f} GFLOP/s, {single['gbps']:.2f} GB/s "
            f"({single['source']})"
        )
    return line


def print_rooflines(result: dict[str, Any]) -> None:
    """One table per configuration with a roofline, under one line naming the peak."""
    shown = [c for c in result["configs"] if c.get("roofline")]
    if not shown:
        return
    print()
    first = shown[0]["roofline"]
    print(peak_line(first["peak"], first.get("single_thread_peak")))
    devices = {
        (p["device"], p["gflops"], p["gbps"], p["source"])
        for c in shown
        for p in c["roofline"].get("device_peaks", {}).values()
    }
    for device, gflops, gbps, source in sorted(devices):
        print(
            f"  device {one_line(device)}: {gflops:.1f} GFLOP/s, {gbps:.2f} GB/s, ridge "
            f"{gflops / gbps:.3g} FLOP/byte ({source or 'reported by its delegate'}); its "
            "partitions are set against these"
        )
    headers = [
        "part",
        "nodes",
        "MFLOP",
        "MB",
        "FLOP/B",
        "ms",
        "GFLOP/s",
        "GB/s",
        "roof GFLOP/s",
        "% of roof",
        "bound",
        "roof of",
    ]
    for c in shown:
        rows = [
            [
                r["name"],
                r["nodes"],
                _cell(r["flops"] / 1e6),
                _cell(r["bytes"] / 1e6),
                _cell(r["intensity"], 3),
                _cell(r["ms"]),
                _cell(r["gflops"]),
                _cell(r["gbps"]),
                _cell(r["roof_gflops"]),
                "" if r["percent_of_roof"] is None else f"{r['percent_of_roof']:.1f}%",
                r["bound"],
                one_line(r.get("roof_of", "cpu")),
            ]
            for r in c["roofline"]["rows"]
        ]
        print(f"  {c['name']}:")
        print(format_table(headers, rows, "    "))
    over = any((r["percent_of_roof"] or 0) > 100 for c in shown for r in c["roofline"]["rows"])
    if over:
        print(
            "  over 100%: the data stayed in the caches, which move it faster than the memory "
            "bandwidth measured (every tensor counted as read from and written to memory)"
        )

"""What ``offload benchmark`` prints: one configuration's figures, a comparison table, a plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from offload.tools._common import (
    UsageError,
    check_output_file,
    fmt_g,
    format_error,
    format_table,
    require_extra,
    write_output,
)

__all__ = ["auto_line", "check_plot_file", "human_bytes", "plot", "print_compare", "print_single"]


def human_bytes(n: int) -> str:
    """Bytes for people: ``512 B``, ``12.3 KiB``, ``4.56 MiB``."""
    if n < 1024:
        return f"{n} B"
    if n < 2**20:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 2**20:.2f} MiB"


def check_plot_file(out: str) -> None:
    """``--plot``'s file, before the runs: its folder, and a type matplotlib writes (it
    would raise ValueError only when saving, after every timed run)."""
    check_output_file(out, "--plot")
    from matplotlib.backend_bases import FigureCanvasBase

    kinds = FigureCanvasBase.get_supported_filetypes()
    suffix = Path(out).suffix.lower().lstrip(".")
    if suffix and suffix not in kinds:
        raise UsageError(
            f"--plot {out!r}: expected an image file type matplotlib writes "
            f"({', '.join(sorted(kinds))}), found {Path(out).suffix!r}"
        )


def plot(rows: list[dict[str, Any]], out: str, title: str) -> None:
    matplotlib = require_extra("matplotlib", "--plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = rows[:30]
    names = [r["name"] for r in rows][::-1]
    values = [r["ms_per_invoke"] for r in rows][::-1]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(rows) + 1.5))
    ax.barh(names, values, color="#3b78c2")
    ax.set_xlabel("ms per invoke")
    ax.set_title(f"per-op time: {Path(title).name}")
    for y, v in enumerate(values):
        ax.text(v, y, f" {v:.3g}", va="center", fontsize=8)
    fig.tight_layout()
    try:
        write_output(out, "--plot", lambda p: fig.savefig(p, dpi=100))
    finally:
        plt.close(fig)


def auto_line(auto: dict[str, Any]) -> str:
    """How long the auto (or default) choice took, and what it was based on."""
    chosen = ", ".join(auto.get("chosen") or [])
    if auto.get("from_cache"):
        how = "remembered decision, nothing timed"
    elif auto.get("mode") == "measured":
        how = (
            f"measured: {fmt_g(auto.get('measure_s') or 0.0)} s of timed runs, "
            f"{fmt_g(auto.get('prepare_s') or 0.0)} s preparing candidates"
        )
    else:
        how = f"{auto.get('mode')} choice, nothing timed"
    line = f"Choosing ({chosen}): {fmt_g(1e3 * (auto.get('choosing_s') or 0.0))} ms ({how})"
    measured = [c for c in auto.get("candidates") or [] if c.get("error") is not None]
    if measured:
        sets = len((auto.get("gate") or {}).get("inputs") or [])
        errors = "; ".join(
            f"{c['label']} {format_error(c['error'])} ({c['status']})" for c in measured
        )
        line += f"\n  worst error over {sets} input set(s): {errors}"
    return line


def print_single(result: dict[str, Any]) -> None:
    c = result["configs"][0]
    inf, warm, mem = c["inference"], c["warmup"], c["memory"]
    print(f"Graph: [{result['model']}] ({result['model_size_bytes']} bytes)")
    used = (
        ", ".join(
            f"{n}: {d['nodes']} nodes in {d['partitions']} partition(s)"
            for n, d in c["delegates"].items()
        )
        or "none"
    )
    print(f"Delegates: {used}; CPU reference: {c['cpu_nodes']} nodes")
    default = c.get("default") or {}
    if default.get("mode") == "default":
        print(f"Default delegates: {', '.join(default['applied'])} (from {default['source']})")
    if "auto" in c:
        print(auto_line(c["auto"]))
    print(f"Loaded model in {fmt_g(result['model_load_ms'])} ms")
    print(f"Initialized in {fmt_g(c['init_ms'])} ms (interpreter + delegates + allocate_tensors)")
    print(
        f"Inference timings in us: Init: {fmt_g(c['init_ms'] * 1e3)}, "
        f"First inference: {fmt_g(c['first_inference_us'])}, "
        f"Warmup (avg): {fmt_g(warm['avg'])}, Inference (avg): {fmt_g(inf['avg'])}"
    )
    print(
        f"Inference ({inf['count']} runs, us): avg={fmt_g(inf['avg'])} std={fmt_g(inf['std'])} "
        f"p50={fmt_g(inf['p50'])} p90={fmt_g(inf['p90'])} min={fmt_g(inf['min'])} "
        f"max={fmt_g(inf['max'])}"
    )
    mb = {key: human_bytes(value) for key, value in mem.items() if isinstance(value, int)}
    print(
        f"Memory (peak RSS rise, {mem['memory_source']}): init={mb['init_peak_rss_rise']} "
        f"first inference={mb['first_inference_peak_rss_rise']} "
        f"inference={mb['inference_peak_rss_rise']}"
    )
    print(
        f"Memory held: tensors={mb['tensors']} (constants {mb['constant_tensors']}) "
        f"arena={mb['arena']} CPU kernel buffers={mb['cpu_kernel_buffers']} "
        f"delegate buffers={mb['delegate_buffers']}"
    )
    if "op_profile" in result:
        print("\nPer-op profile (ms per invoke)")
        rows = [
            [r["name"], r["steps"], f"{r['ms_per_invoke']:.4f}", f"{r['percent']:.1f}%"]
            for r in result["op_profile"]
        ]
        print(format_table(["op / partition", "nodes", "ms", "share"], rows, "  "))
    if "plot" in result:
        print(f"\nwrote {result['plot']}")


def print_compare(result: dict[str, Any]) -> None:
    print(f"Graph: [{result['model']}]; configurations run round-robin in one process")
    rows = []
    for c in result["configs"]:
        if not c.get("available"):
            rows.append([c["name"], "unavailable", "", "", "", "", "", "", "", ""])
            continue
        inf = c["inference"]
        delegated = sum(d["nodes"] for d in c["delegates"].values())
        rows.append(
            [
                c["name"],
                f"{delegated}/{delegated + c['cpu_nodes']}",
                f"{c['init_ms']:.2f}",
                fmt_g(inf["avg"]),
                fmt_g(inf["std"]),
                fmt_g(inf["p50"]),
                fmt_g(inf["p90"]),
                fmt_g(inf["min"]),
                f"{c['latency_ratio_vs_cpu']:.3f}",
                f"{c['speedup_vs_cpu']:.2f}x",
            ]
        )
    print(
        format_table(
            [
                "config",
                "delegated",
                "init ms",
                "avg us",
                "std us",
                "p50 us",
                "p90 us",
                "min us",
                "latency/cpu",
                "speedup",
            ],
            rows,
            "  ",
        )
    )
    for c in result["configs"]:
        if c.get("available") and "auto" in c:
            print(f"  {c['name']}: {auto_line(c['auto'])}")
    for c in result["configs"]:
        if not c.get("available"):
            print(f"  {c['name']}: {c['reason']}")

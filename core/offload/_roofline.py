"""A plan's roofline: its work (FLOPs, bytes moved) per part, against the machine's peak.

:func:`plan_work` gives the static figures of a plan (``delegation_report()["work"]``): per
delegate partition and for the CPU steps together, the FLOPs and bytes of one invoke counted by
:func:`offload.ops.node_work`, and their ratio, the arithmetic intensity. :func:`roofline`
sets those beside measured times (the whole invoke's, and each part's where the interpreter
profiled its steps: :func:`part_times`) and :class:`~offload._machine_peak.MachinePeak`: the
GFLOP/s and GB/s achieved, the roof at the part's intensity (min(peak FLOP/s, intensity x
bandwidth)) and the percent of it reached. ``offload benchmark --roofline`` prints them.

A partition runs under its device's roofs where its kernel reports them
(:meth:`offload.DelegateKernel.device_peak`: gpu_opencl measures its OpenCL device), else
under the CPU's; the whole plan under its one device's when every part runs there, else the
CPU's.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from offload.ops import node_work

if TYPE_CHECKING:
    from offload._delegate import DevicePeak
    from offload._machine_peak import MachinePeak
    from offload._plan import Plan

__all__ = ["CPU_PART", "PLAN_PART", "part_name", "part_times", "plan_work", "roofline"]

PLAN_PART = "plan"
CPU_PART = "cpu"


def part_name(delegate: str, index: int) -> str:
    """A partition's name: the label of its row in ``profile_report()``."""
    return f"{delegate} partition {index}"


def _figures(flops: int, moved: int, nodes: int) -> dict[str, Any]:
    return {
        "nodes": nodes,
        "flops": flops,
        "bytes": moved,
        "intensity": flops / moved if moved else 0.0,
    }


def plan_work(
    plan: Plan,
    shapes: Mapping[int, Sequence[int]] | Sequence[Sequence[int]] | None = None,
    restored: Collection[int] = (),
) -> dict[str, Any]:
    """Per invoke: ``flops``, ``bytes`` and ``intensity`` of the whole plan, of each delegate
    partition (``partitions``: ``index``, ``delegate``, ``name``, ``nodes`` and the figures)
    and of the CPU steps together (``cpu``). A partition handed back to the CPU
    (``restored``) counts as CPU steps, where it runs; the nodes run once at allocation
    (``state_init``) and the folded ones are in no invoke, and count nowhere."""
    sg = plan.subgraph
    cost: dict[int, tuple[int, int]] = {}

    def total(nodes: Sequence[int]) -> dict[str, Any]:
        flops = moved = 0
        for n in nodes:
            if n not in cost:
                work = node_work(sg.nodes[n], sg, shapes)
                cost[n] = (work.flops, work.bytes)
            flops += cost[n][0]
            moved += cost[n][1]
        return _figures(flops, moved, len(nodes))

    state = set(plan.state_init)
    cpu = [n for n in plan.cpu_nodes() if n not in state]
    partitions: list[dict[str, Any]] = []
    for p in plan.partitions:
        if p.index in restored:
            cpu.extend(p.nodes)
            continue
        partitions.append(
            {"index": p.index, "delegate": p.delegate, "name": part_name(p.delegate, p.index)}
            | total(p.nodes)
        )
    cpu_figures = total(sorted(cpu))
    whole = _figures(
        sum(p["flops"] for p in partitions) + cpu_figures["flops"],
        sum(p["bytes"] for p in partitions) + cpu_figures["bytes"],
        sum(p["nodes"] for p in partitions) + cpu_figures["nodes"],
    )
    return {**whole, "partitions": partitions, "cpu": cpu_figures}


def part_times(
    before: Sequence[Mapping[str, Any]],
    after: Sequence[Mapping[str, Any]],
    invokes: int,
    work: Mapping[str, Any],
) -> dict[str, float]:
    """Milliseconds per invoke of each part of ``work`` (its partitions by name, and
    :data:`CPU_PART`), from two ``profile_report()`` snapshots ``invokes`` apart: a
    partition's row is its own, every other row (a CPU op) is the CPU steps'."""
    if invokes < 1:
        return {}
    start = {row["name"]: float(row["total_ms"]) for row in before}
    names = {p["name"] for p in work["partitions"]}
    times: dict[str, float] = {}
    for row in after:
        spent = float(row["total_ms"]) - start.get(row["name"], 0.0)
        part = row["name"] if row["name"] in names else CPU_PART
        times[part] = times.get(part, 0.0) + spent / invokes
    return times


def roofline(
    work: Mapping[str, Any],
    peak: MachinePeak,
    ms_per_invoke: float,
    times: Mapping[str, float] | None = None,
    device_peaks: Mapping[str, DevicePeak] | None = None,
) -> dict[str, Any]:
    """The roofline rows: the plan (timed by ``ms_per_invoke``), each delegate partition and
    the CPU steps (timed by ``times``, from :func:`part_times`, where given; else only the
    static figures), each with ``ms``, ``gflops``, ``gbps`` achieved, ``roof_gflops`` at its
    intensity, ``percent_of_roof``, ``bound`` (``"compute"`` or ``"memory"``) and ``roof_of``
    (the device whose peak it is set against: ``"cpu"``, or a partition's device from
    ``device_peaks``, keyed by partition name)."""
    times = times or {}
    device_peaks = device_peaks or {}
    cpu_roof = Roof(CPU_PART, peak.gflops, peak.gbps)
    roofs = {
        name: Roof(p.device, p.gflops, p.gbps)
        for name, p in device_peaks.items()
        if name in {q["name"] for q in work["partitions"]}
    }
    devices = {roofs[p["name"]] for p in work["partitions"] if p["name"] in roofs}
    whole_on_device = (
        len(devices) == 1
        and not work["cpu"]["nodes"]
        and all(p["name"] in roofs for p in work["partitions"])
    )
    parts: list[tuple[str, Mapping[str, Any], float | None, Roof]] = [
        (PLAN_PART, work, ms_per_invoke, next(iter(devices)) if whole_on_device else cpu_roof)
    ]
    for p in work["partitions"]:
        parts.append((p["name"], p, times.get(p["name"]), roofs.get(p["name"], cpu_roof)))
    if work["cpu"]["nodes"]:
        parts.append((CPU_PART, work["cpu"], times.get(CPU_PART), cpu_roof))
    rows = []
    for name, figures, ms, roof in parts:
        row: dict[str, Any] = {
            "name": name,
            "delegate": figures.get("delegate", CPU_PART if name == CPU_PART else None),
            "nodes": figures["nodes"],
            "flops": figures["flops"],
            "bytes": figures["bytes"],
            "intensity": figures["intensity"],
            "roof_of": roof.device,
            "roof_gflops": roof.at(figures["intensity"]),
            "bound": "compute" if figures["intensity"] >= roof.ridge else "memory",
        }
        row.update(_achieved(figures, ms, roof))
        rows.append(row)
    out: dict[str, Any] = {"peak": peak.to_dict(), "rows": rows}
    if roofs:
        out["device_peaks"] = {name: device_peaks[name].model_dump() for name in sorted(roofs)}
    return out


@dataclass(frozen=True)
class Roof:
    """One device's roofs: float32 multiply-add GFLOP/s and memory GB/s."""

    device: str
    gflops: float
    gbps: float

    @property
    def ridge(self) -> float:
        return self.gflops / self.gbps

    def at(self, intensity: float) -> float:
        """GFLOP/s reachable at ``intensity`` FLOPs per byte: min(peak, intensity x GB/s)."""
        return min(self.gflops, intensity * self.gbps)


def _achieved(figures: Mapping[str, Any], ms: float | None, roof: Roof) -> dict[str, Any]:
    """GFLOP/s and GB/s achieved in ``ms``, and the percent of the roof: max(GFLOP/s over
    the FMA peak, GB/s over the bandwidth), which is GFLOP/s over the roof at the part's
    intensity and stays defined for a part that only moves data."""
    if ms is None or ms <= 0:
        return {"ms": ms, "gflops": None, "gbps": None, "percent_of_roof": None}
    seconds = ms / 1e3
    gflops = figures["flops"] / seconds / 1e9
    gbps = figures["bytes"] / seconds / 1e9
    percent = 100.0 * max(gflops / roof.gflops, gbps / roof.gbps)
    return {"ms": ms, "gflops": gflops, "gbps": gbps, "percent_of_roof": percent}

"""The figures of ``offload sweep``: shard results gathered into one row per model and
configuration, and that report as a table, JSON, CSV and an HTML page with plots.

Items are gathered by index and reduced in index order, so the accuracy and agreement figures
are the same whichever engine, worker count or shard size produced them. Latency and
throughput are per worker: each item runs alone in one worker, one configuration after
another, so they are what one process on one of the machines measured, not the cluster's.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from offload._config_spec import ConfigSpec
from offload._formatting import format_table, json_safe
from offload._sweep_worker import ConfigInfo, SweepShard

__all__ = ["SweepRow", "SweepReport", "Collector", "ModelEntry"]

LATENCY_NOTE = (
    "latency and throughput are per worker: one item at a time in one worker process, "
    "configurations interleaved item by item"
)


@dataclass(frozen=True)
class ModelEntry:
    path: str
    model_type: str = ""
    error: str = ""  # why it did not load in the driver, if it did not


@dataclass
class SweepRow:
    """One model under one configuration.

    ``status``: ``ok``, ``unavailable`` (the configuration cannot run here, ``reason`` says
    why) or ``failed`` (the model or configuration did not load, or no item ran). Accuracy
    (``top1``, ``top5``) is over the items that ran and have labels, None without labels.
    Agreement with the reference configuration: ``top1_agreement`` (same arg-max of the first
    output), ``max_error`` / ``mean_error`` (float outputs, in their units),
    ``max_relative_error`` (over the largest reference magnitude), ``max_steps`` /
    ``mean_steps`` (integer outputs, quantization steps). Latency per worker, in ms.
    """

    model: str
    model_type: str
    config: str
    reference: bool
    status: str
    reason: str = ""
    items: int = 0
    failed_items: int = 0
    failures: list[str] = field(default_factory=list)
    top1: float | None = None
    top5: float | None = None
    top1_agreement: float | None = None
    max_error: float | None = None
    mean_error: float | None = None
    max_relative_error: float | None = None
    max_steps: int | None = None
    mean_steps: float | None = None
    init_ms: float | None = None
    p50_ms: float | None = None
    p90_ms: float | None = None
    mean_ms: float | None = None
    throughput: float | None = None  # items per second, per worker
    memory_bytes: int | None = None
    delegates: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    nodes: dict[str, int] = field(default_factory=dict)
    workers: int = 0
    partition_map: str | None = None
    # Per item, in index order: relative error (floats) or steps (integers) against the
    # reference; for the error plot, left out of the JSON and CSV.
    item_errors: list[float] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("item_errors")
        out["delegates"] = [{"name": n, "options": o} for n, o in self.delegates]
        return json_safe(out)


@dataclass
class SweepReport:
    """What :func:`offload.sweep` returns: the rows, and how they were computed."""

    rows: list[SweepRow]
    engine: str
    workers: int | None
    shard_size: int
    data: str
    num_items: int
    has_labels: bool
    reference: str
    wall_s: float
    retried_shards: int | None
    duplicates_dropped: int
    # Per model, per worker: how many times that worker process loaded the model.
    loads: dict[str, dict[str, int]]
    shards_per_worker: dict[str, int]
    latency_note: str = LATENCY_NOTE

    def row(self, model: str, config: str) -> SweepRow:
        for r in self.rows:
            if (r.model == model or Path(r.model).name == model) and r.config == config:
                return r
        raise KeyError(f"no row for model {model!r} and configuration {config!r}")

    def to_dict(self) -> dict[str, Any]:
        meta = {k: v for k, v in asdict(self).items() if k != "rows"}
        return json_safe({**meta, "rows": [r.to_dict() for r in self.rows]})

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def format_text(self) -> str:
        return format_text(self)

    def write_csv(self, path: str | Path) -> None:
        write_csv(self, Path(path))

    def write_html(self, path: str | Path, partition_maps: bool = True) -> None:
        write_html(self, Path(path), partition_maps)


# -- gathering ------------------------------------------------------------------------------------


class Collector:
    """Shard results as they arrive, the first result per (model, item) kept."""

    def __init__(
        self,
        models: Sequence[ModelEntry],
        configs: Sequence[ConfigSpec],
        reference: int,
        on_shard: Callable[[SweepShard], None] | None = None,
    ) -> None:
        self.models = models
        self.configs = configs
        self.reference = reference
        self.on_shard = on_shard
        self.items: dict[int, dict[int, tuple[str | None, list[dict[str, Any]]]]] = defaultdict(
            dict
        )
        self.infos: dict[int, dict[str, list[ConfigInfo]]] = defaultdict(dict)
        self.loads: dict[int, dict[str, int]] = defaultdict(dict)
        self.shards_per_worker: Counter[str] = Counter()
        self.duplicates = 0

    def __call__(self, result: SweepShard) -> None:
        m = result.model_index
        if result.worker:
            self.infos[m].setdefault(result.worker, result.configs)
            seen = self.loads[m].get(result.worker, 0)
            self.loads[m][result.worker] = max(seen, result.process_loads)
            self.shards_per_worker[result.worker] += 1
        for index, error, figures in result.items:
            if index in self.items[m]:
                self.duplicates += 1  # a retried shard delivered twice: the first one counts
                continue
            self.items[m][index] = (error, figures)
        if self.on_shard is not None:
            self.on_shard(result)

    def rows(self, num_items: int) -> list[SweepRow]:
        rows = []
        for m, entry in enumerate(self.models):
            model_rows = [
                self._row(m, entry, k, spec, num_items) for k, spec in enumerate(self.configs)
            ]
            ref = model_rows[self.reference]
            if ref.status != "ok" and not entry.error:
                # The others ran but have nothing to agree with: say why the column is empty.
                for row in model_rows:
                    if row.status == "ok" and not row.reason:
                        row.reason = (
                            f"no agreement figures: the reference {ref.config!r} did not run "
                            f"({ref.reason or ref.status})"
                        )
            rows += model_rows
        return rows

    def _row(self, m: int, entry: ModelEntry, k: int, spec: ConfigSpec, n: int) -> SweepRow:
        row = SweepRow(entry.path, entry.model_type, spec.label, k == self.reference, "failed")
        if entry.error:
            row.reason = f"model did not load: {entry.error}"
            return row
        infos = [configs[k] for configs in self.infos[m].values() if len(configs) > k]
        loaded = [i for i in infos if i.status == "ok"]
        if not loaded:
            first = infos[0] if infos else None
            row.status = first.status if first else "failed"
            row.reason = first.reason if first else _first_reason(self.items[m])
            return row
        row.status = "ok"
        if len(loaded) < len(infos):  # some workers could not load it (a mixed cluster)
            bad = next(i for i in infos if i.status != "ok")
            row.reason = f"{len(infos) - len(loaded)} of {len(infos)} workers: {bad.reason}"
        row.workers = len(loaded)
        row.init_ms = statistics.median(i.init_s for i in loaded) * 1e3
        row.memory_bytes = max(i.memory_bytes for i in loaded)
        row.delegates, row.nodes = loaded[0].delegates, loaded[0].nodes
        _reduce(row, self.items[m], k, n)
        if row.items == 0:
            row.status = "failed"
            row.reason = row.reason or "no item ran: " + "; ".join(row.failures[:1])
        return row


def _first_reason(items: dict[int, tuple[str | None, list[dict[str, Any]]]]) -> str:
    for _, (error, _) in sorted(items.items()):
        if error:
            return error
    return "no worker reported this configuration"


def _reduce(
    row: SweepRow,
    items: dict[int, tuple[str | None, list[dict[str, Any]]]],
    k: int,
    n: int,
) -> None:
    """Fold the per-item figures of configuration ``k`` into ``row``, in item order."""
    failures: Counter[str] = Counter()
    latencies: list[float] = []
    hit1: list[float] = []
    hit5: list[float] = []
    agree: list[float] = []
    max_err: list[float] = []
    mean_err: list[float] = []
    rel: list[float] = []
    steps: list[float] = []
    mean_steps: list[float] = []
    for index in range(n):
        error, figures = items.get(index, ("no result for this item", []))
        if error is None and len(figures) > k and figures[k].get("error"):
            error = figures[k]["error"]
        if error is not None:
            failures[error] += 1
            continue
        f = figures[k]
        latencies.append(f["latency_s"])
        for values, key in (
            (hit1, "hit1"),
            (hit5, "hit5"),
            (agree, "agree1"),
            (max_err, "max_error"),
            (mean_err, "mean_error"),
            (rel, "rel_error"),
            (steps, "max_steps"),
            (mean_steps, "mean_steps"),
        ):
            if f.get(key) is not None:
                values.append(f[key])
        err = f.get("rel_error")
        row.item_errors.append(float(err if err is not None else (f.get("max_steps") or 0)))
    row.items = len(latencies)
    row.failed_items = sum(failures.values())
    row.failures = [f"{count} x {reason}" for reason, count in failures.most_common(5)]
    row.top1 = _mean(hit1)
    row.top5 = _mean(hit5)
    row.top1_agreement = _mean(agree)
    row.max_error = max(max_err) if max_err else None
    row.mean_error = _mean(mean_err)
    row.max_relative_error = max(rel) if rel else None
    row.max_steps = int(max(steps)) if steps else None
    row.mean_steps = _mean(mean_steps)
    if latencies:
        ms = np.asarray(latencies, np.float64) * 1e3
        row.p50_ms = float(np.percentile(ms, 50))
        row.p90_ms = float(np.percentile(ms, 90))
        row.mean_ms = float(ms.mean())
        row.throughput = len(ms) / float(ms.sum() / 1e3) if ms.sum() > 0 else None


def _mean(values: Sequence[Any]) -> float | None:
    # math.fsum: the same total whatever order the items arrived in.
    return math.fsum(float(v) for v in values) / len(values) if values else None


# -- text and CSV ---------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _rate(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def _bytes(value: int | None) -> str:
    if value is None:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value} B"


def _name(row: SweepRow) -> str:
    return Path(row.model).name


def table_rows(report: SweepReport) -> list[list[str]]:
    out = []
    for r in report.rows:
        ref = r.reference and r.status == "ok"
        out.append(
            [
                _name(r),
                r.model_type or "-",
                r.config + (" (ref)" if r.reference else ""),
                r.status,
                str(r.items) + (f"+{r.failed_items} failed" if r.failed_items else ""),
                _pct(r.top1) if report.has_labels else "-",
                _pct(r.top5) if report.has_labels else "-",
                "ref" if ref else _pct(r.top1_agreement),
                "ref" if ref else _num(r.max_error),
                "ref" if ref else _num(r.mean_error),
                "ref" if ref else ("-" if r.max_steps is None else str(r.max_steps)),
                _num(r.init_ms),
                _num(r.p50_ms),
                _num(r.p90_ms),
                _rate(r.throughput),
                _bytes(r.memory_bytes),
            ]
        )
    return out


HEADERS = [
    "model",
    "type",
    "config",
    "status",
    "items",
    "top1",
    "top5",
    "agree",
    "max err",
    "mean err",
    "steps",
    "init ms",
    "p50 ms",
    "p90 ms",
    "items/s",
    "memory",
]


def format_text(report: SweepReport) -> str:
    lines = [
        f"sweep: {len({r.model for r in report.rows})} models x "
        f"{len({r.config for r in report.rows})} configurations over {report.data}",
        f"engine {report.engine}, {report.workers or 'autoscaled'} workers, shards of "
        f"{report.shard_size}, {report.wall_s:.2f} s; reference {report.reference}",
        "",
        format_table(HEADERS, table_rows(report)),
        "",
        f"agree: top-1 agreement with the reference; err: max |a-b| and mean |a-b| of float "
        f"outputs; steps: integer outputs. Note: {report.latency_note}.",
    ]
    notes = []
    for r in report.rows:
        if r.reason:
            notes.append(f"  {_name(r)} / {r.config}: {r.status}: {r.reason}")
        for failure in r.failures:
            notes.append(f"  {_name(r)} / {r.config}: {failure}")
    if notes:
        lines += ["", "problems:", *notes]
    if report.retried_shards:
        lines.append(f"{report.retried_shards} shards ran again after a worker died")
    return "\n".join(lines)


CSV_FIELDS = [
    "model",
    "model_type",
    "config",
    "reference",
    "status",
    "reason",
    "items",
    "failed_items",
    "top1",
    "top5",
    "top1_agreement",
    "max_error",
    "mean_error",
    "max_relative_error",
    "max_steps",
    "mean_steps",
    "init_ms",
    "p50_ms",
    "p90_ms",
    "mean_ms",
    "throughput",
    "memory_bytes",
    "workers",
]


def write_csv(report: SweepReport, path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for r in report.rows:
            d = r.to_dict()
            writer.writerow({k: "" if d.get(k) is None else d[k] for k in CSV_FIELDS})


# -- HTML ---------------------------------------------------------------------------------------


def _png(fig: Any) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _plots(report: SweepReport) -> list[tuple[str, str]]:
    """(caption, base64 PNG): accuracy (or agreement) against latency, error distributions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in report.rows if r.status == "ok" and r.p50_ms is not None]
    plots: list[tuple[str, str]] = []
    if not ok:
        return plots
    metric = "top1" if report.has_labels else "top1_agreement"
    label = "top-1 accuracy" if report.has_labels else "top-1 agreement with the reference"
    configs = list(dict.fromkeys(r.config for r in ok))
    models = list(dict.fromkeys(_name(r) for r in ok))
    markers = "os^vD<>ph*"
    fig, ax = plt.subplots(figsize=(7, 4.5))
    colours = plt.get_cmap("tab10")
    for r in ok:
        y = getattr(r, metric)
        if y is None or r.p50_ms is None:
            continue
        ax.scatter(
            r.p50_ms,
            100 * y,
            color=colours(configs.index(r.config) % 10),
            marker=markers[models.index(_name(r)) % len(markers)],
            s=60,
        )
    for c, config in enumerate(configs):
        ax.scatter([], [], color=colours(c % 10), label=config)
    for m, model in enumerate(models):
        ax.scatter([], [], color="grey", marker=markers[m % len(markers)], label=model)
    ax.set_xscale("log")
    ax.set_xlabel("median latency per item, ms (per worker, log)")
    ax.set_ylabel(f"{label}, %")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    plots.append((f"{label} against latency, per model and configuration", _png(fig)))
    plt.close(fig)
    for model in models:
        rows = [r for r in ok if _name(r) == model and not r.reference and r.item_errors]
        if not rows:
            continue
        fig, ax = plt.subplots(figsize=(1.5 + 1.2 * len(rows), 4))
        data = [np.maximum(np.asarray(r.item_errors), 1e-12) for r in rows]
        # Vertical boxes with ticks set by hand: boxplot's label and orientation keywords
        # changed names across the matplotlib versions the tools extra allows.
        ax.boxplot(data)
        ax.set_xticks(range(1, len(rows) + 1), [r.config for r in rows], fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("per item: max relative error\n(integer outputs: steps); 1e-12 = exact")
        ax.set_title(f"{model}: error against {report.reference}", fontsize=9)
        plots.append((f"{model}: error distribution per configuration", _png(fig)))
        plt.close(fig)
    return plots


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "config"


def _partition_maps(report: SweepReport, folder: Path) -> None:
    """``offload check --html`` for every model and configuration that ran, in ``folder``."""
    from offload._loader import load_model
    from offload._plan_report import plan_report

    # The maps are the pages of ``offload check --html``, which the command line draws;
    # imported when a report asks for them, so that importing the library does not load the
    # command line.
    from offload.tools._common import build_delegates
    from offload.tools._graph_draw import plan_html

    models: dict[str, Any] = {}
    # Numbered by model: two folders may hold models of the same name.
    number = {m: k for k, m in enumerate(dict.fromkeys(r.model for r in report.rows))}
    for r in report.rows:
        if r.status != "ok":
            continue
        try:
            model = models.get(r.model) or models.setdefault(r.model, load_model(r.model))
            choices = build_delegates(r.delegates, allow_unavailable=True)
            check, plan = plan_report(r.model, model, choices)
            unavailable = {
                n: d["reason"] for n, d in check["plan"]["delegates"].items() if not d["available"]
            }
            folder.mkdir(parents=True, exist_ok=True)
            stem = f"{number[r.model]}_{_safe(Path(r.model).stem)}"
            target = folder / f"{stem}__{_safe(r.config)}.html"
            target.write_text(plan_html(check, plan, unavailable), encoding="utf-8")
            r.partition_map = f"{folder.name}/{target.name}"
        except Exception:  # a map is an extra: the row's figures stand without it
            r.partition_map = None


def write_html(report: SweepReport, path: Path, partition_maps: bool = True) -> None:
    if partition_maps:
        _partition_maps(report, path.parent / f"{path.stem}_maps")
    esc = html.escape
    rows = table_rows(report)
    body = []
    for r, cells in zip(report.rows, rows):
        tds = "".join(f"<td>{esc(c)}</td>" for c in cells)
        link = f'<a href="{esc(r.partition_map)}">plan</a>' if r.partition_map else ""
        title = esc(r.reason or "; ".join(r.failures))
        body.append(f'<tr title="{title}" class="{esc(r.status)}">{tds}<td>{link}</td></tr>')
    head = "".join(f"<th>{esc(h)}</th>" for h in [*HEADERS, "partition map"])
    figures = "".join(
        f'<figure><img alt="{esc(c)}" src="data:image/png;base64,{png}">'
        f"<figcaption>{esc(c)}</figcaption></figure>"
        for c, png in _plots(report)
    )
    problems = "".join(
        f"<li>{esc(_name(r))} / {esc(r.config)}: {esc(r.status)}: {esc(r.reason)}</li>"
        for r in report.rows
        if r.reason
    ) + "".join(
        f"<li>{esc(_name(r))} / {esc(r.config)}: {esc(f)}</li>"
        for r in report.rows
        for f in r.failures
    )
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>offload sweep</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; }}
table {{ border-collapse: collapse; font-size: 0.85em; }}
td, th {{ border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; }}
td:nth-child(-n+4) {{ text-align: left; }}
tr.failed, tr.unavailable {{ color: #a00; }}
figure {{ display: inline-block; margin: 1em; }}
</style></head><body>
<h1>offload sweep</h1>
<p>{esc(report.data)}; engine {esc(report.engine)}, {esc(str(report.workers or "autoscaled"))}
workers; reference {esc(report.reference)}; {report.wall_s:.2f} s.</p>
<p>{esc(report.latency_note)}.</p>
<table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>
{f"<h2>Problems</h2><ul>{problems}</ul>" if problems else ""}
<h2>Plots</h2>
{figures or "<p>no configuration ran</p>"}
</body></html>
"""
    path.write_text(page, encoding="utf-8")

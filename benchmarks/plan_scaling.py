"""How planning time grows with the number of nodes (issue 11, "hostile models").

Builds graphs of N nodes with :mod:`offload.model.builder` and times loading the model and
``allocate_tensors`` (planning, partitioning, kernels, liveness, arena): a RELU chain on the
CPU, an ADD/RELU chain whose ADD nodes the dummy delegate takes (N/2 partitions), and N
ADD/RELU nodes all reading the input (one wide wave of each kind). A planner that is
O(n log n) shows time growing about linearly with N; a quadratic one shows x16 from 5k to
20k nodes.

    python benchmarks/plan_scaling.py [--sizes 1000 5000 20000] [--runs 3] [--litert]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import offload
from offload.model.builder import ModelBuilder

_SHAPE = (1, 8)


def chain(n: int, ops: tuple[str, ...]) -> bytes:
    """A chain of ``n`` nodes cycling through ``ops`` (RELU reads x, ADD reads x and zero)."""
    b = ModelBuilder()
    x = b.add_input("x", shape=_SHAPE)
    # One shared constant: ADD(x, 0) keeps values finite over thousands of nodes.
    zero = b.add_constant("zero", np.zeros(_SHAPE, np.float32))
    for k in range(n):
        op = ops[k % len(ops)]
        y = b.add_tensor(f"t{k}", shape=_SHAPE)
        b.add_operator(op, [x] if op == "RELU" else [x, zero], [y])
        x = y
    b.add_output(x)
    return b.build()


def fan_out(n: int, ops: tuple[str, ...]) -> bytes:
    """``n`` nodes cycling through ``ops``, each reading the input; every output is returned."""
    b = ModelBuilder()
    x = b.add_input("x", shape=_SHAPE)
    zero = b.add_constant("zero", np.zeros(_SHAPE, np.float32))
    for k in range(n):
        op = ops[k % len(ops)]
        y = b.add_tensor(f"t{k}", shape=_SHAPE)
        b.add_operator(op, [x] if op == "RELU" else [x, zero], [y])
        b.add_output(y)
    return b.build()


def time_plan(content: bytes, delegates: list[str] | None, runs: int) -> tuple[float, float]:
    """Median seconds for (loading the model, allocate_tensors)."""
    loads, allocs = [], []
    for _ in range(runs):
        start = time.perf_counter()
        interp = offload.Interpreter(model_content=content, delegates=delegates)
        loaded = time.perf_counter()
        interp.allocate_tensors()
        allocs.append(time.perf_counter() - loaded)
        loads.append(loaded - start)
        # The plan is real: one invoke runs every step.
        interp.set_tensor(interp.get_input_details()[0]["index"], np.ones(_SHAPE, np.float32))
        interp.invoke()
    return statistics.median(loads), statistics.median(allocs)


def time_litert(content: bytes, runs: int) -> float:
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    times = []
    for _ in range(runs):
        start = time.perf_counter()
        LiteRT(model_content=content, num_threads=1).allocate_tensors()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--litert", action="store_true", help="also time LiteRT (load+allocate)")
    args = parser.parse_args()
    cases = [
        ("RELU chain, CPU only", chain, ("RELU",), None),
        ("ADD/RELU chain, dummy takes ADD", chain, ("ADD", "RELU"), ["dummy"]),
        ("ADD/RELU fan-out, dummy takes ADD", fan_out, ("ADD", "RELU"), ["dummy"]),
    ]
    header = f"{'case':34} {'nodes':>6} {'load s':>8} {'allocate s':>11} {'us/node':>8}"
    if args.litert:
        header += f" {'LiteRT s':>9}"
    print(header)
    for label, build, ops, delegates in cases:
        for n in args.sizes:
            content = build(n, ops)
            load, alloc = time_plan(content, delegates, args.runs)
            line = f"{label:34} {n:6d} {load:8.3f} {alloc:11.3f} {1e6 * alloc / n:8.1f}"
            if args.litert:
                line += f" {time_litert(content, args.runs):9.3f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()

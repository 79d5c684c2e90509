"""``offload benchmark --graph MODEL``: LiteRT's benchmark_model, for offload's Interpreter.

Timings: model load, init (interpreter creation + delegate application + allocate_tensors),
first inference, warm-up and steady-state latency. Memory: the peak RSS rise during init and
during inference (``/proc/self/status`` VmHWM, reset through ``/proc/self/clear_refs``; else
``getrusage``), plus what ``Interpreter.memory_report()`` counts (tensors, arena, CPU kernel
and delegate buffers). ``--compare cpu,dummy`` runs several configurations in one process,
round-robin. ``--profile`` adds, per delegate, device time per kernel family from profiled runs
after the timed ones. ``--roofline`` sets each plan's FLOPs and bytes per invoke, and each of its
parts', beside the machine's measured peak. The parts: ``_bench_memory`` (RSS probe),
``_bench_runs`` (configurations and timed runs), ``_bench_profile`` (device profiles),
``_bench_roofline`` (rooflines), ``_bench_print`` (tables and plot).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from offload._interpreter import Interpreter
from offload._loader import load_model
from offload._machine_peak import machine_peak
from offload.tools._bench_memory import MemoryProbe
from offload.tools._bench_print import check_plot_file, plot, print_compare, print_single
from offload.tools._bench_profile import print_device_profiles, profile_configs
from offload.tools._bench_roofline import print_rooflines, roofline_configs
from offload.tools._bench_runs import (
    Config,
    add_ratios,
    compare_configs,
    init_config,
    op_profile,
    timed_loop,
)
from offload.tools._common import (
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    add_delegate_args,
    add_json_arg,
    interpreter_delegates,
    print_json,
    random_inputs,
    require_extra,
)

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "benchmark",
        help="measure load, init and inference time and memory (LiteRT's benchmark_model)",
        description="Time and measure one model: load, init, first inference, warm-up, steady "
        "state latency (avg/std/p50/p90/min/max, microseconds) and memory.",
    )
    p.add_argument("--graph", required=True, metavar="MODEL", help="path to a .tflite model")
    p.add_argument("--num_threads", type=int, default=None, help="passed to the Interpreter")
    p.add_argument("--warmup_runs", type=int, default=1, help="warm-up invokes (default 1)")
    p.add_argument(
        "--warmup_min_secs",
        type=float,
        default=0.0,
        help="keep warming up for at least this long (default 0)",
    )
    p.add_argument("--num_runs", type=int, default=50, help="timed invokes, at least (default 50)")
    p.add_argument(
        "--min_secs",
        type=float,
        default=1.0,
        help="keep running past --num_runs until this many seconds passed (default 1)",
    )
    p.add_argument(
        "--max_secs",
        type=float,
        default=150.0,
        help="stop once this many seconds passed, even before --num_runs (default 150)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument(
        "--enable_op_profiling",
        action="store_true",
        help="time every op / partition and print the table",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="after the timed runs, profile the delegates on their device: time per kernel "
        "family, launches, GFLOP/s, device busy vs wall time",
    )
    p.add_argument(
        "--profile_runs",
        type=int,
        default=10,
        help="invokes measured with --profile (default 10)",
    )
    p.add_argument(
        "--roofline",
        action="store_true",
        help="FLOPs and bytes per invoke of the plan and of each partition, the GFLOP/s and "
        "GB/s achieved, and the percent of the machine's roof at that intensity (the peak is "
        "measured at first use and cached; every step is timed, as with --enable_op_profiling)",
    )
    p.add_argument("--plot", metavar="PNG", help="draw per-op time to a PNG (needs offload[tools])")
    p.add_argument(
        "--compare",
        metavar="CONFIGS",
        help="comma-separated configurations run round-robin in one process, e.g. "
        "cpu,gpu_opencl,dummy ('cpu' = the CPU reference alone, 'auto' = the measured choice, "
        "'default' = offload's default delegates)",
    )
    add_delegate_args(p)
    add_json_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    path = args.graph
    if not Path(path).is_file():
        raise UsageError(f"model {path!r}: no such file")
    if args.num_runs < 1 or args.warmup_runs < 0:
        raise UsageError("--num_runs must be >= 1 and --warmup_runs >= 0")
    if args.profile_runs < 1:
        raise UsageError(f"--profile_runs must be >= 1, found {args.profile_runs}")
    if args.plot:
        require_extra("matplotlib", "--plot")
        check_plot_file(args.plot)  # now, not after the timed runs
    op_table = bool(args.plot or args.enable_op_profiling)
    # The roofline times each part from the step profile, which costs a clock read per step.
    profile = op_table or args.roofline
    peak = single = None
    if args.roofline:
        # LiteRT's default is 1 thread; the roof is measured at the count the delegates run.
        threads = args.num_threads if args.num_threads and args.num_threads > 0 else 1
        # Measured before any model runs, so that the probe and the timed runs never overlap.
        peak = machine_peak(threads)
        single = machine_peak(1) if threads > 1 else None  # beside it: one core's share
    rng = np.random.default_rng(args.seed)
    probe = MemoryProbe()
    t0 = time.perf_counter()
    model = load_model(model_path=path)
    load_s = time.perf_counter() - t0
    del model
    if args.compare:
        configs = compare_configs(args)
    else:
        chosen = interpreter_delegates(args)
        if chosen is None:
            label = "default"
        elif isinstance(chosen, str):
            label = chosen
        else:
            label = "+".join(d.name for d in chosen) or "cpu"
        configs = [Config(label, chosen)]
    inputs = None
    if any(c.delegates == "auto" and not c.unavailable for c in configs):
        # Drawn before any configuration loads, so that auto checks its candidates on them.
        reference = Interpreter(model_path=path, delegates=[])
        reference.allocate_tensors()
        inputs = random_inputs(reference.get_input_details(), rng)
        del reference
    for c in configs:
        if c.unavailable:
            continue
        inputs = init_config(c, path, args, profile, probe, inputs, rng)
    show = not args.json
    timed_loop(configs, args, show)
    if args.profile:
        profile_configs(configs, args.profile_runs)
    if peak is not None:
        roofline_configs(configs, peak, single)
    result: dict[str, Any] = {
        "model": path,
        "model_size_bytes": os.path.getsize(path),
        "model_load_ms": load_s * 1e3,
        "num_threads": args.num_threads,
        "configs": [c.summary() for c in configs],
    }
    if args.compare:
        add_ratios(result)
    main = configs[0]
    if op_table and main.interpreter is not None:
        result["op_profile"] = op_profile(main)
    error = None
    if args.plot and main.interpreter is not None:
        try:
            plot(result["op_profile"], args.plot, path)
            result["plot"] = args.plot
        except UsageError as exc:  # printed after the figures, which must not be lost with it
            error = exc
    if args.json:
        print_json(result)
    elif args.compare:
        print_compare(result)
    else:
        print_single(result)
    if args.profile and not args.json:
        print_device_profiles(result)
    if args.roofline and not args.json:
        print_rooflines(result)
    if error is not None:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK

"""``offload sweep``: the command line of :func:`offload.sweep` (``offload._sweep``), which
runs models x configurations over a data set; here only its flags, its output files and
what it prints.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from offload._sweep import LITERT_REFERENCE, sweep
from offload.errors import UsageError
from offload.tools._common import (
    CPU_CHOICE,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    check_output_file,
    require_extra,
    write_output,
)

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="models x delegate configurations over a data set: accuracy, agreement, latency",
        description="Run every model under every configuration over one data set (an image "
        "folder with labels, an .npz, or seeded random inputs) and report, per model and "
        "configuration, top-1/top-5 accuracy, agreement with a reference configuration, "
        "latency and memory; locally in a process pool or on a Ray cluster.",
    )
    p.add_argument("models", nargs="+", metavar="MODEL", help=".tflite files or folders of them")
    p.add_argument(
        "--config",
        "-c",
        action="append",
        default=[],
        metavar="SPEC",
        help="a configuration (repeatable): cpu, auto, default, or delegates with options, "
        "e.g. litert, openvino:num_threads=1, gpu_opencl:precision_loss_allowed=true, "
        "openvino+litert (priority order); default: cpu",
    )
    p.add_argument(
        "--reference",
        metavar="SPEC",
        default=None,
        help=f"the configuration others are compared with (default: {LITERT_REFERENCE} where "
        "offload-litert runs here, else cpu)",
    )
    data = p.add_argument_group("data set (one of)")
    data.add_argument("--images", metavar="DIR", help="a folder of images (as eval classify)")
    data.add_argument("--labels", metavar="FILE", help="ground truth for --images, one per line")
    data.add_argument(
        "--model_output_labels", metavar="FILE", help="class names in output order (for --labels)"
    )
    data.add_argument("--npz", metavar="FILE", help="input arrays, one row per item ('labels')")
    data.add_argument("--random", type=int, metavar="N", help="N seeded random inputs")
    data.add_argument("--seed", type=int, default=0, help="seed of --random (default 0)")
    data.add_argument(
        "--num_images",
        "--limit",
        type=int,
        default=0,
        dest="limit",
        help="use the first N items (0: all)",
    )
    data.add_argument("--mean", default="127.5", help="float image inputs: mean (or R,G,B)")
    data.add_argument("--std", default="127.5", help="float image inputs: std (or R,G,B)")
    data.add_argument("--crop_fraction", type=float, default=0.875, help="central crop (0.875)")
    run_group = p.add_argument_group("engine")
    run_group.add_argument("--engine", choices=("local", "ray"), default="local")
    run_group.add_argument(
        "--workers",
        type=int,
        default=None,
        help="processes (local; default: CPU count; 1 = serial, in this process) or Ray actors "
        "(default: autoscaled to the cluster's CPUs)",
    )
    run_group.add_argument(
        "--shard-size",
        "--shard_size",
        type=int,
        dest="shard_size",
        default=None,
        help="items per shard / Ray batch",
    )
    run_group.add_argument(
        "--ray-address",
        "--ray_address",
        dest="ray_address",
        default=None,
        help="join this Ray cluster (default: start a local one)",
    )
    run_group.add_argument("--num_threads", type=int, default=None, help="per interpreter")
    run_group.add_argument(
        "--auto_budget_s",
        type=float,
        default=None,
        help="seconds the 'auto' configuration may spend choosing",
    )
    out = p.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one JSON document")
    out.add_argument("--csv", metavar="FILE", help="write the rows as CSV")
    out.add_argument(
        "--html",
        metavar="FILE",
        help="write an HTML report with plots and partition maps (needs offload[tools])",
    )
    p.set_defaults(func=run)


def _numbers(text: str, what: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in text.split(","))
    except ValueError:
        raise UsageError(f"--{what}: expected a number or R,G,B numbers, found {text!r}") from None


P = ParamSpec("P")
T = TypeVar("T")


def _stdout_on_stderr(func: Callable[P, T]) -> Callable[P, T]:
    """``func``, run with this process's stdout sent to stderr: stdout is the report's alone.
    Ray prints its notices (a task to be retried, a node marked dead) to stdout from a thread
    of its own, so a sweep on a cluster that loses a node would put them inside ``--json``;
    the file descriptor is redirected, not only ``sys.stdout``, so that native code and the
    worker processes started meanwhile follow."""

    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        sys.stdout.flush()
        try:
            saved = os.dup(1)
        except OSError:  # no stdout to keep clean
            return func(*args, **kwargs)
        try:
            with contextlib.suppress(OSError):  # no stderr: Python's own prints still move
                os.dup2(2, 1)
            with contextlib.redirect_stdout(sys.stderr):
                return func(*args, **kwargs)
        finally:
            os.dup2(saved, 1)
            os.close(saved)

    return call


def run(args: argparse.Namespace) -> int:
    if args.html:
        require_extra("matplotlib", "offload sweep --html")
    for option, path in (("--csv", args.csv), ("--html", args.html)):
        if path:
            check_output_file(path, option)  # now, not after a sweep of hours
    report = _stdout_on_stderr(sweep)(
        args.models,
        args.config or [CPU_CHOICE],
        images=args.images,
        labels=args.labels,
        model_output_labels=args.model_output_labels,
        npz=args.npz,
        random=args.random,
        seed=args.seed,
        limit=args.limit,
        reference=args.reference,
        engine=args.engine,
        workers=args.workers,
        shard_size=args.shard_size,
        ray_address=args.ray_address,
        num_threads=args.num_threads,
        auto_budget_s=args.auto_budget_s,
        mean=_numbers(args.mean, "mean"),
        std=_numbers(args.std, "std"),
        crop_fraction=args.crop_fraction,
        progress=not args.json,
    )
    # A file that cannot be written (the disk filled up during the sweep) must not take the
    # figures with it: the report is printed all the same, then the error, and exit 2.
    written: list[str] = []
    errors: list[UsageError] = []
    for option, path, write in (
        ("--csv", args.csv, report.write_csv),
        ("--html", args.html, report.write_html),
    ):
        if path:
            try:
                write_output(path, option, write)
                written.append(path)
            except UsageError as exc:
                errors.append(exc)
    if args.json:
        print(report.to_json())
    else:
        print(report.format_text())
        for path in written:
            print(f"wrote {path}")
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    if errors:
        return EXIT_USAGE
    return EXIT_OK if any(r.status == "ok" for r in report.rows) else EXIT_FAILED

"""``offload check MODEL``: model type, op histogram, the partition plan and why nodes fell back.

The plan is data: it is computed without running anything, so a delegate that is installed
but unavailable here is still planned (with default options plus any given) and shown as
unavailable with its reason. Two exceptions: ``--delegate auto`` measures the candidate plans
(or takes the remembered decision) and prints every candidate's figures; with no
``--delegate``, the plan is that of offload's default delegates (what
``offload.Interpreter(MODEL)`` runs, chosen without timing), and ``--delegate cpu`` plans the
CPU reference alone.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from offload._interpreter import Interpreter
from offload._loader import load_model
from offload._plan_report import DelegateChoice, plan_report
from offload._report_text import render_text
from offload.tools._common import (
    CPU_CHOICE,
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_delegate_args,
    add_json_arg,
    build_delegates,
    check_output_file,
    interpreter_options,
    print_json,
    requested_delegates,
    write_output,
)
from offload.tools._graph_draw import plan_html, plan_svg


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="show the model type, op histogram, partition plan and fallback reasons",
        description="Plan MODEL for the given delegates without running it: per delegate the "
        "nodes, partitions, boundary tensors and bytes copied per invoke; for every op left "
        "on the CPU, each delegate's reason.",
    )
    p.add_argument("model", help="path to a .tflite model")
    add_delegate_args(p)
    add_json_arg(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--html", metavar="FILE", help="write an HTML report with the graph drawn")
    out.add_argument("--svg", metavar="FILE", help="write the graph, coloured by delegate, as SVG")
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 if any node is left on the CPU while delegates were asked for, or if the "
        "CPU reference has no kernel for a node it must run",
    )
    p.set_defaults(func=run)


def _choices(args: argparse.Namespace) -> tuple[list[DelegateChoice], Any, Any]:
    """The delegates to plan, the auto figures (if any), and which default applied (if any).

    ``--delegate auto`` measures here (or takes the remembered decision); no ``--delegate``
    shows what ``offload.Interpreter(MODEL)`` would run, which times nothing.
    """
    pairs = requested_delegates(args)
    names = [n for n, _ in pairs]
    if names == [CPU_CHOICE]:
        return [], None, None
    if names in (["auto"], []):
        delegates = "auto" if names else None
        it = Interpreter(model_path=args.model, delegates=delegates, **interpreter_options(args))
        chosen = [DelegateChoice(d.name, d, True) for d in it.delegates]
        default = None if names else it.delegation_report()["default"]
        return chosen, it.auto_selection, default
    if "auto" in names or CPU_CHOICE in names:
        raise UsageError(
            "--delegate auto and --delegate cpu cannot be combined with other delegates"
        )
    return build_delegates(pairs, allow_unavailable=True), None, None


def run(args: argparse.Namespace) -> int:
    if not Path(args.model).is_file():
        raise UsageError(f"model {args.model!r}: no such file")
    for option, path in (("--html", args.html), ("--svg", args.svg)):
        if path:
            check_output_file(path, option)
    model = load_model(model_path=args.model)
    choices, auto, default = _choices(args)
    report, plan = plan_report(args.model, model, choices, auto, default)
    unavailable = {
        n: d["reason"] for n, d in report["plan"]["delegates"].items() if not d["available"]
    }
    if args.html:
        page = plan_html(report, plan, unavailable)
        write_output(args.html, "--html", lambda p: p.write_text(page, encoding="utf-8"))
        report["html"] = args.html
    if args.svg:
        drawing = plan_svg(plan, unavailable)
        write_output(args.svg, "--svg", lambda p: p.write_text(drawing, encoding="utf-8"))
        report["svg"] = args.svg
    if args.json:
        print_json(report)
    else:
        print(render_text(report))
        for kind in ("html", "svg"):
            if kind in report:
                print(f"\nwrote {report[kind]}")
    asked = bool(choices) and default is None  # the default's choice was not asked for
    if args.strict and (
        (asked and report["plan"]["cpu"]["nodes"]) or report["cpu_missing_kernels"]
    ):
        return EXIT_FAILED
    return EXIT_OK

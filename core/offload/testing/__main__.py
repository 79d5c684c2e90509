"""``python -m offload.testing DELEGATE [--options JSON] [--strict] [--exact] [--json]``.

Runs every conformance case on DELEGATE (an installed delegate's name, a path to a .py file,
or a module), with the cases installed packages register for it (entry-point group
``offload.conformance_cases``) and any named by ``--cases MODULE:ATTR``; prints one line per
case and one per declared op, and exits 1 when a case fails or, with ``--strict``, when a
declared op is never exercised or always refused. ``--exact`` holds integer and bool outputs
to the reference bit for bit. Needs no pytest. Exit status 2: the delegate or its cases could
not be loaded, or the arguments are wrong.
"""

from __future__ import annotations

import argparse
import json
import sys

from offload._plugins import load_delegate
from offload.errors import OffloadError
from offload.testing._cases import CASES, OpCase
from offload.testing._extra import delegate_cases, load_cases
from offload.testing._report import print_report
from offload.testing._runner import run_conformance


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m offload.testing`` (the docs' examples are checked
    against it)."""
    parser = argparse.ArgumentParser(
        prog="python -m offload.testing",
        description="Run offload's conformance cases on a delegate against the CPU reference.",
    )
    parser.add_argument("delegate", help="installed delegate name, or path/to/delegate.py")
    parser.add_argument("--options", default="{}", help="delegate options as a JSON object")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="also fail a declared op that no case exercises or that every case refuses",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="NAME=REASON",
        help="skip a case or an op (upper-case name), with the reason; repeatable",
    )
    parser.add_argument(
        "--exact",
        action="store_true",
        help="integer and bool outputs must match the reference bit for bit (0 steps)",
    )
    parser.add_argument(
        "--cases",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="add the cases this names (a sequence of OpCase, or a function returning one)",
    )
    parser.add_argument("--case", action="append", default=[], help="run only these cases")
    parser.add_argument("--all", action="store_true", help="list every case, claimed or not")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    exclusions: dict[str, str] = {}
    for item in args.exclude:
        name, sep, reason = item.partition("=")
        if not sep or not name or not reason:
            parser.error(f"--exclude expects NAME=REASON, found {item!r}")
        exclusions[name] = reason
    try:
        options = json.loads(args.options)
    except json.JSONDecodeError as exc:
        parser.error(f"--options expects a JSON object, found {args.options!r} ({exc})")
    try:
        delegate = load_delegate(args.delegate, options)
        extra = [*delegate_cases(delegate.name), *(c for s in args.cases for c in load_cases(s))]
    except OffloadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cases: tuple[OpCase, ...] = (*CASES, *extra)
    if args.case:
        known = {c.name for c in cases}
        unknown = [n for n in args.case if n not in known]
        if unknown:
            parser.error(f"unknown case(s) {unknown}; known: {', '.join(sorted(known))}")
        cases = tuple(c for c in cases if c.name in args.case)
    report = run_conformance(delegate, exclusions, cases, exact=args.exact)
    if args.json:
        print(json.dumps({**report.to_dict(), "ok": report.ok(args.strict)}, indent=2))
    else:
        print_report(report, strict=args.strict, everything=args.all)
    return 0 if report.ok(args.strict) else 1


if __name__ == "__main__":
    sys.exit(main())

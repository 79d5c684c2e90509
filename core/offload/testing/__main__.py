"""``python -m offload.testing DELEGATE [--options JSON] [--strict] [--json]``: the kit.

Runs every conformance case on DELEGATE (an installed delegate's name, a path to a .py file,
or a module), prints one line per case and one per declared op, and exits 1 when a case
fails or, with ``--strict``, when a declared op is never exercised or always refused.
Needs no pytest. Exit status 2: the delegate could not be loaded or the arguments are wrong.
"""

from __future__ import annotations

import argparse
import json
import sys

from offload._plugins import load_delegate
from offload.errors import OffloadError
from offload.testing._cases import CASES
from offload.testing._runner import ConformanceReport, run_conformance


def _print_table(report: ConformanceReport, strict: bool, everything: bool) -> None:
    listed = {o.op for o in report.ops}
    hidden = 0
    for r in report.results:
        if not everything and r.status == "not-claimed" and r.op not in listed:
            hidden += 1
            continue
        print(f"{r.status:12} {r.case:38} {r.op:18} {r.dtype:8} {r.detail}")
    if hidden:
        print(f"({hidden} cases of ops the delegate does not declare; --all lists them)")
    print()
    print(f"{'op':18} {'verdict':16} pass fail refused not-claimed excluded")
    for o in report.ops:
        mark = "  <- fails" if o.fails(strict) else ""
        print(
            f"{o.op:18} {o.verdict:16} {o.passed:4} {o.failed:4} {o.refused:7} "
            f"{o.not_claimed:11} {o.excluded:8}{mark}"
        )
        if o.detail and o.verdict != "ok":
            print(f"{'':18} {o.detail}")
        for reason in o.refusals:
            if not (o.detail and o.detail.endswith(reason)):  # all-refused already quotes it
                print(f"{'':18} refused: {reason}")
    statuses = ("pass", "fail", "error", "refused", "not-claimed", "excluded")
    counts = {s: sum(r.status == s for r in report.results) for s in statuses}
    print()
    print(", ".join(f"{n} {s}" for s, n in counts.items()))
    if not strict:
        unchecked = [o.op for o in report.ops if o.fails(True) and not o.fails(False)]
        if unchecked:
            print(
                f"warning: declared but unchecked: {', '.join(unchecked)} "
                "(a failure under --strict)"
            )


def main(argv: list[str] | None = None) -> int:
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
    parser.add_argument("--case", action="append", default=[], help="run only these cases")
    parser.add_argument("--all", action="store_true", help="list every case, claimed or not")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    exclusions: dict[str, str] = {}
    for item in args.exclude:
        name, sep, reason = item.partition("=")
        if not sep or not name or not reason:
            parser.error(f"--exclude expects NAME=REASON, found {item!r}")
        exclusions[name] = reason
    cases = CASES
    if args.case:
        known = {c.name for c in CASES}
        unknown = [n for n in args.case if n not in known]
        if unknown:
            parser.error(f"unknown case(s) {unknown}; known: {', '.join(sorted(known))}")
        cases = tuple(c for c in CASES if c.name in args.case)
    try:
        options = json.loads(args.options)
    except json.JSONDecodeError as exc:
        parser.error(f"--options expects a JSON object, found {args.options!r} ({exc})")
    try:
        delegate = load_delegate(args.delegate, options)
    except OffloadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = run_conformance(delegate, exclusions, cases)
    if args.json:
        print(json.dumps({**report.to_dict(), "ok": report.ok(args.strict)}, indent=2))
    else:
        _print_table(report, args.strict, args.all)
    return 0 if report.ok(args.strict) else 1


if __name__ == "__main__":
    sys.exit(main())

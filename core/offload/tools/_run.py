"""``offload run``: an unmodified LiteRT program, run with offload behind its imports.

``offload run [--delegate NAME ...] [delegate flags] [--report] -- python app.py ARGS`` runs
the command with offload's ``sitecustomize`` (offload/_run_site) first on ``PYTHONPATH`` and
the delegate choice in the environment. Python processes the command starts get the same
choice; the first LiteRT import in each installs :func:`offload.patch_litert`. With
``--report`` (or ``--report-json FILE``) each process writes what ran where at exit, and this
command prints it after the program ends. The exit code is the program's.

A process that makes its first LiteRT import leaves a ``process-PID.started`` mark in the report
folder at once; one that then ends without its exit handlers (``os._exit``, a signal, a
crash) leaves no report beside it, and is listed as "no report came back from process PID"
rather than counted as a process that made no interpreter. ``--report-json``'s folder is
checked before the program starts; a report that still cannot be written afterwards is one
line on stderr, and the exit code stays the program's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from offload._patch import CONFIG_ENV, REPORT_STARTED_SUFFIX
from offload.errors import UsageError
from offload.tools._common import (
    EXIT_USAGE,
    add_delegate_args,
    build_delegates,
    check_output_file,
    requested_delegates,
    write_output,
)

__all__ = ["add_parser", "run", "format_report"]

_SITE = Path(__file__).resolve().parent.parent / "_run_site"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run an unmodified LiteRT program (tflite_runtime, ai_edge_litert, tf.lite) on "
        "offload",
        description="Run COMMAND (usually: python app.py ...) with offload behind "
        "tflite_runtime.interpreter, ai_edge_litert.interpreter and, with "
        "--tensorflow-stand-in, tensorflow.lite. Every "
        "interpreter the program makes gets the delegates named here, after any it passes "
        "itself; with none named, offload's defaults apply, as LiteRT applies XNNPACK.",
        usage="offload run [--delegate NAME ...] [flags] [--report] -- COMMAND [ARGS ...]",
    )
    add_delegate_args(p)
    p.add_argument(
        "--reference",
        action="store_true",
        help="run every interpreter on the CPU reference alone (no delegates, not even "
        "offload's defaults)",
    )
    p.add_argument(
        "--tensorflow-stand-in",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="stand in for tensorflow with tf.lite's interpreter pieces (hiding a real "
        "TensorFlow); off by default, so that a program probing for TensorFlow takes the branch "
        "it takes without offload (--no-tensorflow-stand-in, the default, is accepted)",
    )
    p.add_argument(
        "--report", action="store_true", help="print what ran where (to stderr) at the end"
    )
    p.add_argument(
        "--report-json", metavar="FILE", help="write what ran where as JSON to FILE at the end"
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="the program and its arguments")
    p.set_defaults(func=run)


def _config(args: argparse.Namespace) -> dict[str, Any]:
    """The patch_litert arguments for the program, checked here so that a bad delegate is a
    usage error of this command, not an exception inside the program."""
    pairs = requested_delegates(args)
    if args.reference:
        if pairs:
            raise UsageError("--reference runs the CPU reference alone: drop the --delegate flags")
        return {"delegates": [], "options": {}}
    if not pairs:
        return {"delegates": None, "options": {}}
    names = [name for name, _ in pairs]
    if "auto" in names:
        if len(names) > 1:
            raise UsageError("--delegate auto picks the delegates itself: pass it alone")
        return {"delegates": "auto", "options": {}}
    build_delegates(pairs)  # unknown or unavailable: an error now, with the reason
    options = {name: dict(opts) for name, opts in pairs if opts}
    try:
        json.dumps(options)
    except TypeError as exc:
        raise UsageError(f"delegate options cannot be passed to the program: {exc}") from None
    return {"delegates": names, "options": options}


def run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise UsageError(
            "offload run needs a command after '--', e.g. offload run -- python app.py"
        )
    config = _config(args)
    if args.report_json:
        # Before the program runs: a report folder mistyped must not cost a run of the program.
        check_output_file(args.report_json, "--report-json")
    config["tensorflow"] = args.tensorflow_stand_in
    wants_report = bool(args.report or args.report_json)
    with tempfile.TemporaryDirectory(prefix="offload-run-") as report_dir:
        if wants_report:
            config["report_dir"] = report_dir
        env = dict(os.environ)
        env[CONFIG_ENV] = json.dumps(config)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_SITE), env.get("PYTHONPATH", "")) if p)
        try:
            code = subprocess.call(command, env=env)
        except OSError as exc:  # not found, not executable
            print(f"error: offload run: cannot start {command[0]!r}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        processes = _read_reports(Path(report_dir)) if wants_report else []
    if args.report_json:
        document = json.dumps({"processes": processes}, indent=2)
        try:
            write_output(args.report_json, "--report-json", lambda p: p.write_text(document))
        except UsageError as exc:  # the program ran: its exit status is the one to keep
            print(f"offload run: the report was not written: {exc}", file=sys.stderr)
    if args.report:
        print(format_report(processes), file=sys.stderr)
    # A program killed by a signal: the shell's convention, 128 + the signal number.
    return code if code >= 0 else 128 - code


def _read_reports(directory: Path) -> list[dict[str, Any]]:
    """Each process's report; a process that started one (its mark is there) and wrote none
    ended without its exit handlers, and is listed with an ``error`` saying so."""
    processes = []
    reported = set()
    for path in sorted(directory.glob("process-*.json")):
        reported.add(path.stem)
        try:
            processes.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            pid = path.stem.removeprefix("process-")
            processes.append(
                {
                    "pid": int(pid) if pid.isdigit() else pid,
                    "interpreters": [],
                    "error": f"the report of process {pid} is unreadable: {exc}",
                }
            )
    for mark in sorted(directory.glob(f"process-*{REPORT_STARTED_SUFFIX}")):
        stem = mark.name.removesuffix(REPORT_STARTED_SUFFIX)
        if stem in reported:
            continue
        pid = stem.removeprefix("process-")
        try:
            started = json.loads(mark.read_text())
        except (OSError, ValueError):
            started = {}
        processes.append(
            {
                "pid": int(pid) if pid.isdigit() else pid,
                "argv": started.get("argv"),
                "interpreters": [],
                "error": f"no report came back from process {pid}: it imported LiteRT and "
                "ended without running its exit handlers (os._exit, a signal or a crash)",
            }
        )
    return processes


def format_report(processes: list[dict[str, Any]]) -> str:
    """What ran where, per interpreter of each process, for people."""
    interpreters = [(p, row) for p in processes for row in p.get("interpreters", [])]
    # A process whose report is missing or unreadable may have made interpreters: say so
    # rather than that the program made none.
    missing = [f"offload run: {p['error']}" for p in processes if p.get("error")]
    if not interpreters:
        if missing:
            return "\n".join(missing)
        return "offload run: the program made no interpreter through LiteRT's imports"
    lines = [f"offload run: {len(interpreters)} interpreter(s)"]
    for process, row in interpreters:
        pid = f"process {process.get('pid')}, " if len(processes) > 1 else ""
        lines.append(f"[{pid}interpreter {row['interpreter']}] {row['model']} (via {row['via']})")
        if row.get("error"):
            lines.append(f"    not planned: {row['error']}")
            continue
        report = row.get("report") or {}
        total = report.get("node_count", 0)
        for name, entry in report.get("delegates", {}).items():
            count = len(entry.get("nodes", []))
            parts = len(entry.get("partitions", []))
            line = f"    {name}: {count} of {total} nodes in {parts} partition(s)"
            if entry.get("rejected_model"):
                line += f"; model refused: {entry['rejected_model']}"
            lines.append(line)
        cpu = len(report.get("cpu", {}).get("nodes", []))
        lines.append(f"    CPU reference: {cpu} of {total} nodes")
        # Without delegates every node is the CPU's by choice: nothing "fell back".
        fallback = report.get("fallback", {}) if report.get("delegates") else {}
        for op, entry in sorted(fallback.items()):
            reasons = [
                f"{delegate}: {reason}"
                for delegate, by_reason in entry.get("reasons", {}).items()
                for reason in by_reason
            ]
            lines.append(
                f"      {op} x{entry['count']}" + (f" ({'; '.join(reasons)})" if reasons else "")
            )
        for partition, why in report.get("restored_to_cpu", {}).items():
            lines.append(f"    partition {partition} restored to the CPU: {why}")
    return "\n".join(lines + missing)

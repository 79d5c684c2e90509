"""The ``offload`` command line: ``delegates``, ``check``, ``benchmark``, ``diff``, ``eval``,
``demo``, ``run``, ``sweep``.

Exit codes: 0 success; 1 a check failed or a threshold was exceeded; 2 usage or bad input
(every :class:`offload.errors.OffloadError` is printed as ``error: ...``, never a traceback).
Plugins add sub-commands through the ``offload_add_commands`` hook.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence

from offload import _demo
from offload._plugins import call_hook, plugin_manager
from offload.errors import OffloadError
from offload.tools import (
    _benchmark,
    _check,
    _classify,
    _delegates,
    _diff,
    _run,
    _sweep,
    _version,
)
from offload.tools._common import EXIT_USAGE
from offload.tools._terminal import safe_output

__all__ = ["main", "build_parser"]


def _add_plugin_commands(subparsers: argparse._SubParsersAction) -> None:
    """Each loaded plugin's ``offload_add_commands``, through the one hook path of _plugins."""
    pm = plugin_manager().pm
    for name, _ in pm.list_name_plugin():  # only plugins that loaded stay registered
        try:
            call_hook(pm, name, "offload_add_commands", subparsers=subparsers)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # one broken plugin must not take the command line down
            warnings.warn(
                f'offload plugin "{name}" failed to add its commands: '
                f"{type(exc).__name__}: {exc} (raised by hook offload_add_commands)",
                stacklevel=2,
            )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="offload",
        description="Run, check and measure .tflite models with offload's delegates.",
    )
    # offload and every installed plugin with its version and supported offload range.
    parser.add_argument("--version", action=_version.VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _delegates.add_parser(sub)
    _check.add_parser(sub)
    _benchmark.add_parser(sub)
    _diff.add_parser(sub)
    _classify.add_parser(sub)
    _run.add_parser(sub)
    _sweep.add_parser(sub)
    demo = sub.add_parser(
        "demo",
        help="build a small model with the builder and run it "
        "on the CPU and every available delegate",
    )
    demo.add_argument("--runs", type=int, default=20, help="timed invokes per configuration")
    demo.set_defaults(func=lambda args: _demo.main(args.runs))
    _add_plugin_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (the console script exits with it).

    Everything it prints goes through one sanitiser (offload.tools._terminal): names in a
    model file are untrusted, and a control character in one must not reach the terminal.
    """
    with safe_output():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        func = getattr(args, "func", None)
        if func is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        return int(func(args) or 0)
    except SystemExit as exc:  # argparse: --help (0) and usage errors (2)
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else EXIT_USAGE)
    except OffloadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `offload check m.tflite | head`: the reader left, not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

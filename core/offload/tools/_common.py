"""Helpers every sub-command shares: delegate flags, output files, progress, JSON, stats."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from offload._config_spec import CPU_CHOICE, ConfigSpec, parse_config_spec
from offload._delegate import Delegate
from offload._extras import require_extra
from offload._formatting import (
    TEXT_WIDTH,
    fit_table,
    format_error,
    format_table,
    json_default,
    json_safe,
    wrap_text,
)
from offload._plan_report import DelegateChoice
from offload._plugins import (
    _availability,
    _external_delegate_class,
    delegate_class,
    delegate_providers,
    is_native_library,
    list_delegates,
    load_delegate,
    native_library_delegate,
    plugin_manager,
)
from offload._providers import add_provider_flags, delegates_from_args
from offload._seeded_inputs import INPUT_KINDS, input_arrays, random_inputs
from offload.errors import DelegateUnavailableError, UsageError

__all__ = [
    "EXIT_OK",
    "EXIT_FAILED",
    "EXIT_USAGE",
    "UsageError",
    "DelegateChoice",
    "add_delegate_args",
    "add_json_arg",
    "requested_delegates",
    "interpreter_options",
    "CPU_CHOICE",
    "build_delegates",
    "require_extra",
    "progress",
    "print_json",
    "json_safe",
    "fmt_g",
    "format_table",
    "format_error",
    "fit_table",
    "wrap_text",
    "TEXT_WIDTH",
    "latency_stats",
    "random_inputs",
    "INPUT_KINDS",
    "input_arrays",
    "ConfigSpec",
    "parse_config_spec",
    "check_output_file",
    "write_output",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

T = TypeVar("T")


# UsageError lives in offload.errors with every other error, and configuration specs, seeded
# inputs, tables, JSON and the extras in library modules that offload.sweep and
# offload.diff_per_node use too; they are imported here so that a command finds every helper
# in one place.


# -- delegate flags -----------------------------------------------------------------------


def add_json_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print one JSON document instead of text"
    )


def add_delegate_args(parser: argparse.ArgumentParser) -> None:
    """``--delegate NAME`` (repeatable), every plugin's flags, LiteRT's external-delegate flags."""
    parser.add_argument(
        "--delegate",
        action="append",
        default=[],
        metavar="NAME",
        help="an installed delegate to use, in priority order (repeatable); 'auto' measures the "
        "candidate plans here and keeps the fastest (remembered); 'cpu' the CPU reference "
        "alone; none: offload's default delegates, as offload.Interpreter(model_path) applies "
        "them (a remembered auto choice, else litert where installed)",
    )
    parser.add_argument(
        "--auto_budget_s",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds of timed runs 'auto' may spend choosing (default 2; 0: the static rule); "
        "part of a remembered decision's key",
    )
    parser.add_argument(
        "--clear_auto_cache",
        action="store_true",
        help="forget every remembered auto decision first, so this run measures again",
    )
    options = {record.name: record.cls.Options for record in list_delegates()}
    add_provider_flags(parser, delegate_providers(), options)


def interpreter_options(args: argparse.Namespace) -> dict[str, Any]:
    """The Interpreter keywords the auto flags ask for; ``--clear_auto_cache`` acts here."""
    if getattr(args, "clear_auto_cache", False):
        from offload._auto_cache import clear_auto_cache

        clear_auto_cache()
    budget = getattr(args, "auto_budget_s", None)
    if budget is not None and not budget >= 0:
        raise UsageError(f"--auto_budget_s must be a number of seconds >= 0, found {budget}")
    return {} if budget is None else {"auto_budget_s": budget}


def requested_delegates(args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    """(name or path, options) pairs: ``--delegate`` names first, then the plugin flags.

    A delegate named by ``--delegate`` takes its option flags too; an option flag for a
    delegate not selected is a usage error naming the flag that selects it.
    """
    names = list(getattr(args, "delegate", None) or [])
    chosen: list[tuple[str, dict[str, Any]]] = [(n, {}) for n in names]
    try:
        from_flags = delegates_from_args(args, delegate_providers(), selected=names)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    for name, options in from_flags:
        for i, (existing, _) in enumerate(chosen):
            if existing == name:  # --delegate dummy --use_dummy_delegate: one, with options
                chosen[i] = (name, options)
                break
        else:
            chosen.append((name, options))
    return chosen


def _delegate_class_for(name: str) -> type[Delegate]:
    if name in plugin_manager().delegates:
        return delegate_class(name)
    if name.endswith(".py") or "/" in name or "." in name:
        return _external_delegate_class(name)
    return delegate_class(name)


def build_delegates(
    pairs: Sequence[tuple[str, dict[str, Any]]], *, allow_unavailable: bool = False
) -> list[DelegateChoice]:
    """Configured delegates for ``pairs``; unavailable ones raise unless ``allow_unavailable``.

    With ``allow_unavailable`` an unavailable delegate is still built with its options (its
    plan is data and can be computed without running it) and marked with the reason.
    """
    choices: list[DelegateChoice] = []
    for name, options in pairs:
        if name == "auto":
            raise UsageError("'auto' cannot be combined here; pass --delegate auto on its own")
        try:
            d = load_delegate(name, options)
            choices.append(DelegateChoice(d.name, d, True))
        except DelegateUnavailableError:
            if not allow_unavailable:
                raise
            if is_native_library(name) and name not in plugin_manager().delegates:
                d = native_library_delegate(name, options, allow_unavailable=True)
            else:
                d = _delegate_class_for(name)(options)
            reason = _availability(type(d)).reason
            choices.append(DelegateChoice(d.name, d, False, reason))
    return choices


def interpreter_delegates(args: argparse.Namespace) -> str | list[Delegate] | None:
    """What to pass as ``Interpreter(delegates=...)`` for the parsed flags: ``"auto"``, ``[]``
    for ``--delegate cpu``, None (offload's default) when nothing is named, else the delegates."""
    pairs = requested_delegates(args)
    names = [n for n, _ in pairs]
    if names == ["auto"]:
        return "auto"
    if names == [CPU_CHOICE]:
        return []
    if not pairs:
        return None
    if CPU_CHOICE in names or "auto" in names:
        raise UsageError("--delegate auto and --delegate cpu each stand alone")
    return [c.delegate for c in build_delegates(pairs)]


# -- output files -------------------------------------------------------------------------


def check_output_file(path: str | os.PathLike[str], option: str) -> Path:
    """``option``'s output file, checked before the work whose result it keeps: a report that
    cannot be written must stop the command before a sweep or a program runs, not after it.

    Its folder must exist (a mistyped folder is refused, not created) and be writable, and the
    path must not be a folder. Raises :class:`UsageError` saying which.
    """
    p = Path(path)
    parent = p.parent  # Path("x.csv").parent is Path("."): the working folder
    if p.is_dir():
        raise UsageError(f"{option} {str(path)!r}: expected a file to write, found a folder")
    if not parent.is_dir():
        found = "a file" if parent.exists() else "nothing"
        raise UsageError(
            f"{option} {str(path)!r}: expected an existing folder {str(parent)!r} to write it "
            f"in, found {found} there"
        )
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(
            f"{option} {str(path)!r}: expected a file this user may write, found it or its "
            "folder read-only"
        )
    return p


def write_output(path: str | os.PathLike[str], option: str, write: Callable[[Path], Any]) -> None:
    """``write(path)``, with an OSError (disk full, the folder removed since it was checked) as
    one :class:`UsageError` line naming the option, not a traceback."""
    try:
        write(Path(path))
    except OSError as exc:
        raise UsageError(
            f"{option} {str(path)!r}: expected to write the file, found "
            f"{type(exc).__name__}: {exc.strerror or exc}"
        ) from None


# -- optional extras ----------------------------------------------------------------------


def progress(items: Iterable[T], *, total: int | None, desc: str, enabled: bool) -> Iterator[T]:
    """A tqdm progress bar on a terminal (stderr) only; the plain iterable otherwise."""
    if enabled and sys.stderr.isatty():
        try:
            from tqdm import tqdm
        except ImportError:  # a progress bar is cosmetic: no extra, no bar
            pass
        else:
            yield from tqdm(items, total=total, desc=desc, leave=False, file=sys.stderr)
            return
    yield from items


# -- output -------------------------------------------------------------------------------


def print_json(data: Any) -> None:
    print(json.dumps(json_safe(data), indent=2, default=json_default, allow_nan=False))


def fmt_g(value: float) -> str:
    """A number as C++'s ``std::ostream << double`` writes it by default (``%g``, 6 digits)."""
    return f"{float(value):g}"


# -- measurements -------------------------------------------------------------------------


def latency_stats(seconds: Sequence[float]) -> dict[str, float]:
    """avg, std, min, max, p50, p90 of ``seconds``, in microseconds (LiteRT's unit)."""
    if not seconds:
        return {k: math.nan for k in ("count", "avg", "std", "min", "max", "p50", "p90")}
    us = np.asarray(seconds, dtype=np.float64) * 1e6
    return {
        "count": int(us.size),
        "avg": float(us.mean()),
        "std": float(us.std()),
        "min": float(us.min()),
        "max": float(us.max()),
        "p50": float(np.percentile(us, 50)),
        "p90": float(np.percentile(us, 90)),
    }

"""Helpers every sub-command shares: delegate flags, output, extras, random inputs, stats."""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from offload._delegate import Delegate
from offload._plugins import (
    _availability,
    _external_delegate_class,
    delegate_class,
    delegate_providers,
    is_native_library,
    list_delegates,
    load_delegate,
    native_delegate_class,
    plugin_manager,
)
from offload._providers import add_provider_flags, delegates_from_args
from offload.errors import DelegateUnavailableError, UsageError
from offload.tools._terminal import one_line

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
    "latency_stats",
    "random_inputs",
    "INPUT_KINDS",
    "input_arrays",
    "ConfigSpec",
    "parse_config_spec",
    "check_output_file",
    "write_output",
]

# ``--delegate cpu``: the CPU reference alone (as ``--compare cpu``), not a delegate's name.
CPU_CHOICE = "cpu"

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

T = TypeVar("T")


# UsageError lives in offload.errors with every other error; imported here for the commands.


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


@dataclass
class DelegateChoice:
    """A requested delegate: the object (built even if unavailable) and whether it can run here."""

    name: str
    delegate: Delegate
    available: bool
    reason: str = ""


def _delegate_class_for(name: str) -> type[Delegate]:
    if name in plugin_manager().delegates:
        return delegate_class(name)
    if is_native_library(name):
        return native_delegate_class(name)
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
            cls = _delegate_class_for(name)
            reason = _availability(cls).reason
            native = is_native_library(name) and name not in plugin_manager().delegates
            d = cls.for_native_library(name, options) if native else cls(options)
            choices.append(DelegateChoice(cls.name, d, False, reason))
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


# -- configuration specs -----------------------------------------------------------------


@dataclass(frozen=True)
class ConfigSpec:
    """One configuration as text names it: ``cpu``, ``auto``, ``default``, or delegates in
    priority order with their options (``openvino:num_threads=1+litert``).

    Option values stay text: each delegate's pydantic Options converts them ("1" to 1,
    "true" to True) and names the option when it cannot.
    """

    label: str
    kind: str  # "cpu", "auto", "default" or "delegates"
    delegates: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()

    def pairs(self) -> list[tuple[str, dict[str, str]]]:
        return [(name, dict(options)) for name, options in self.delegates]

    def interpreter_delegates(self) -> str | list[Delegate] | None:
        """What ``Interpreter(delegates=...)`` gets; loading a delegate may raise
        :class:`DelegateUnavailableError` (here) or :class:`PluginError` (not installed)."""
        if self.kind == CPU_CHOICE:
            return []
        if self.kind == "auto":
            return "auto"
        if self.kind == "default":
            return None
        return [load_delegate(name, options) for name, options in self.pairs()]


_SPECIAL = (CPU_CHOICE, "auto", "default")


def parse_config_spec(text: str) -> ConfigSpec:
    """``name[:key=value[,key=value...]]``, several joined by ``+`` in priority order.

    ``cpu`` is the CPU reference alone, ``auto`` the plan measured here, ``default`` offload's
    default delegates; these stand alone. Bad syntax is a :class:`UsageError` saying what was
    expected; whether a named delegate is installed or available is not checked here.
    """
    label = text.strip()
    if not label:
        raise UsageError(
            "a configuration: expected a delegate spec such as 'cpu' or "
            "'openvino:num_threads=1', found an empty string"
        )
    parts = [part.strip() for part in label.split("+")]
    delegates: list[tuple[str, tuple[tuple[str, str], ...]]] = []
    for part in parts:
        name, sep, rest = part.partition(":")
        name = name.strip()
        if not name or (sep and not rest.strip()):
            raise UsageError(
                f"configuration {label!r}: expected 'name' or 'name:key=value,...', found {part!r}"
            )
        if "," in name or "=" in name:
            raise UsageError(
                f"configuration {label!r}: expected a delegate name before ':', found {name!r} "
                "(one configuration per --config; options follow the name: 'name:key=value')"
            )
        options: list[tuple[str, str]] = []
        for item in filter(None, (o.strip() for o in rest.split(","))):
            key, eq, value = item.partition("=")
            if not eq or not key.strip():
                raise UsageError(
                    f"configuration {label!r}: expected options as key=value separated by "
                    f"commas, found {item!r} (one configuration per --config)"
                )
            options.append((key.strip(), value.strip()))
        delegates.append((name, tuple(options)))
    names = [n for n, _ in delegates]
    special = [n for n in names if n in _SPECIAL]
    if special:
        if len(names) > 1 or delegates[0][1]:
            raise UsageError(
                f"configuration {label!r}: expected {special[0]!r} alone, without options or "
                "other delegates"
            )
        return ConfigSpec(label, special[0])
    return ConfigSpec(label, "delegates", tuple(delegates))


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


def require_extra(module: str, what: str) -> Any:
    """Import ``module`` from the ``offload[tools]`` extra or fail with how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(
            f"{what} needs the Python package {module.split('.')[0]!r}, which is not installed; "
            "install the command-line extras with: pip install offload[tools]"
        ) from None


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


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, Path):
        return str(value)
    return str(value)


def json_safe(value: Any) -> Any:
    """NaN and infinities become null: JSON has no spelling for them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def print_json(data: Any) -> None:
    print(json.dumps(json_safe(data), indent=2, default=_jsonable, allow_nan=False))


def fmt_g(value: float) -> str:
    """A number as C++'s ``std::ostream << double`` writes it by default (``%g``, 6 digits)."""
    return f"{float(value):g}"


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], indent: str = "") -> str:
    """A plain left-aligned text table (numbers right-aligned); a cell is one line, whatever
    a model's names hold."""
    cells = [[str(h) for h in headers]] + [
        ["" if c is None else one_line(str(c)) for c in r] for r in rows
    ]
    numeric = [
        all(_is_number(row[i]) for row in cells[1:] if row[i]) and len(cells) > 1
        for i in range(len(headers))
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for k, row in enumerate(cells):
        parts = [
            c.rjust(w) if numeric[i] and k else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths))
        ]
        lines.append(indent + "  ".join(parts).rstrip())
        if k == 0:
            lines.append(indent + "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _is_number(text: str) -> bool:
    try:
        float(text.rstrip("x%"))
    except ValueError:
        return False
    return True


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


def random_inputs(details: Sequence[dict[str, Any]], rng: np.random.Generator) -> list[np.ndarray]:
    """One random array per input: Gaussian floats, quantized properly for int8/uint8 inputs."""
    arrays = []
    for d in details:
        shape = tuple(int(s) for s in d["shape"])
        dtype = np.dtype(d["dtype"])
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(shape).astype(dtype))
        elif dtype in (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16)):
            scale, zero_point = d["quantization"]
            info = np.iinfo(dtype)
            values = rng.standard_normal(shape)
            if scale:
                q = np.round(values / scale) + zero_point
            else:
                q = rng.integers(info.min, int(info.max) + 1, size=shape)
            arrays.append(np.clip(q, info.min, info.max).astype(dtype))
        elif dtype == np.dtype(bool):
            arrays.append(rng.random(shape) < 0.5)
        elif dtype.kind in "iu":
            arrays.append(rng.integers(0, 10, size=shape).astype(dtype))
        else:
            raise UsageError(
                f"input {d['name']!r} has dtype {dtype}; random inputs are made only for "
                "numeric and bool tensors"
            )
    return arrays


# What each ``--input`` kind draws for float inputs; integer inputs quantize the same draw.
INPUT_KINDS: dict[str, str] = {
    "normal": "N(0,1)",
    "uniform": "U(-1,1)",
    "image": "U(0,1), image-like",
    "wide": "N(0,1)*100, a large dynamic range",
}


def _float_draw(kind: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if kind == "normal":
        return rng.standard_normal(shape)
    if kind == "uniform":
        return rng.uniform(-1.0, 1.0, shape)
    if kind == "image":
        return rng.random(shape)
    if kind == "wide":
        return rng.standard_normal(shape) * 100.0
    raise UsageError(f"input kind must be one of {', '.join(INPUT_KINDS)}, found {kind!r}")


def input_arrays(
    details: Sequence[dict[str, Any]], rng: np.random.Generator, kind: str = "normal"
) -> list[np.ndarray]:
    """One random array per input, drawn as ``kind`` says (see :data:`INPUT_KINDS`).

    Quantized int8/uint8/int16 inputs get the float draw quantized with the input's scale and
    zero point, clipped to the type's range: the same values a float model would see, so a
    quantized and a float variant of one model can be fed alike. With ``kind="normal"`` the
    arrays are exactly :func:`random_inputs`' for the same generator state.
    """
    if kind == "normal":
        return random_inputs(details, rng)
    arrays = []
    for d in details:
        shape = tuple(int(s) for s in d["shape"])
        dtype = np.dtype(d["dtype"])
        scale, zero_point = d["quantization"]
        if dtype.kind == "f":
            arrays.append(_float_draw(kind, shape, rng).astype(dtype))
        elif dtype in (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16)) and scale:
            info = np.iinfo(dtype)
            q = np.round(_float_draw(kind, shape, rng) / scale) + zero_point
            arrays.append(np.clip(q, info.min, info.max).astype(dtype))
        else:  # not quantized (indices, masks, raw codes): no float draw to quantize
            arrays.extend(random_inputs([d], rng))
    return arrays


def format_error(error: dict[str, float] | None) -> str:
    """A candidate's measured error (worst over auto's input sets) as tables show it: relative
    and steps, and classifier rows whose top-1 changed; the reference itself (no figure)
    blank."""
    if not error:
        return "" if error is None else "0"
    parts = []
    if "relative" in error:
        parts.append(f"{error['relative']:.1e} rel")
    if "steps" in error:
        parts.append(f"{error['steps']:g} steps")
    if error.get("top1_changes"):
        parts.append(f"top-1 changed x{error['top1_changes']:g}")
    return ", ".join(parts) or "0"

"""Which delegates an Interpreter runs: named ones, the CPU reference alone, ``"auto"``, or
offload's default, and why.

The order, first match wins:

1. ``delegates="auto"``: measured and remembered (:mod:`offload._auto`).
2. Any delegate named, by ``experimental_delegates`` or ``delegates``: those, in that order,
   the CPU reference running the rest. ``delegates=[]`` alone names the CPU reference alone.
3. ``experimental_op_resolver_type`` ``BUILTIN_WITHOUT_DEFAULT_DELEGATES`` or ``BUILTIN_REF``:
   the CPU reference alone, as LiteRT then runs its kernels without its default delegates.
4. ``$OFFLOAD_DELEGATES`` (for programs that cannot be edited): ``auto``, ``cpu`` (the CPU
   reference alone; ``none`` and ``reference`` say the same), ``default``, or delegate names
   separated by commas.
5. The default: the decision ``"auto"`` stored for this model, input shapes, machine,
   versions, options and budget where there is one; else ``litert`` where it is installed and
   available; else the static rule. The default measures nothing.

The auto and default choices are made when first needed (``allocate_tensors``, ``plan()``,
``delegation_report()``, ``delegates``, ``auto_selection``), with the input shapes then set.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from offload._auto import select
from offload._auto_cache import ModelSource
from offload._delegate import Delegate
from offload._plugins import list_delegates, load_delegate
from offload._settings import AutoSettings

if TYPE_CHECKING:
    from offload._executor import Executor
    from offload._graph import Model

__all__ = ["DELEGATES_ENV", "DelegateSelection"]

DELEGATES_ENV = "OFFLOAD_DELEGATES"
_REFERENCE_WORDS = ("cpu", "none", "reference")
_NO_DEFAULT_RESOLVERS = ("BUILTIN_WITHOUT_DEFAULT_DELEGATES", "BUILTIN_REF")


class DelegateSelection:
    """The Interpreter's delegates and the story of how they were chosen."""

    def __init__(
        self,
        model: Model,
        model_path: str | os.PathLike[str] | None,
        delegates: str | Sequence[str | Delegate] | None,
        experimental_delegates: Sequence[Delegate] | None,
        resolver: Any,
        settings: AutoSettings,
    ) -> None:
        self.model = model
        self.settings = settings
        self.model_path = model_path
        self.summary: dict[str, Any] | None = None
        # What each candidate of an auto or default choice refused, node by node (Selection).
        self.refusals: dict[str, dict[int, str]] = {}
        named: list[Delegate] = list(experimental_delegates or [])
        for d in named:
            if not isinstance(d, Delegate):
                raise TypeError(
                    "experimental_delegates expects offload.Delegate objects, "
                    f"found {type(d).__name__}"
                )
        resolver_name = getattr(resolver, "name", None)
        if isinstance(delegates, str) and delegates == "auto":
            if named:
                raise ValueError(
                    "delegates='auto' chooses the delegates itself; pass either "
                    "experimental_delegates or delegates='auto', not both"
                )
            self._set("auto", [], 'delegates="auto" measures the candidates and keeps the fastest')
        elif named or delegates is not None:
            if isinstance(delegates, str):
                named.append(load_delegate(delegates))
            elif delegates is not None:
                for item in delegates:
                    named.append(item if isinstance(item, Delegate) else load_delegate(item))
            if named:
                self._set("explicit", named, "named by the program")
            else:
                self._set("reference", [], "delegates=[] names the CPU reference alone")
        elif resolver_name in _NO_DEFAULT_RESOLVERS:
            self._set(
                "reference",
                [],
                f"experimental_op_resolver_type={resolver_name} runs the CPU reference without "
                "default delegates",
            )
        else:
            self._from_environment()
        if self.pending:
            # Discovered now, with the interpreter: a later allocate_tensors then only looks
            # up or measures, as it only allocates when the delegates are given by name.
            list_delegates()

    def _set(self, mode: str, delegates: list[Delegate], why: str, source: str = "") -> None:
        self.mode = mode
        self.delegates = delegates
        self.why = why
        self.source = source or ("argument" if mode != "default" else "")
        self.pending = mode in ("auto", "default")

    def _from_environment(self) -> None:
        raw = os.environ.get(DELEGATES_ENV, "").strip()
        word = raw.lower()
        where = f"${DELEGATES_ENV}={raw}"
        if not raw or word == "default":
            self._set("default", [], "no delegate named")
        elif word == "auto":
            self._set("auto", [], f"{where} asks for the measured choice", "environment")
        elif word in _REFERENCE_WORDS:
            self._set("reference", [], f"{where} names the CPU reference alone", "environment")
        else:
            names = [n.strip() for n in raw.split(",") if n.strip()]
            chosen = [load_delegate(n) for n in names]
            self._set("explicit", chosen, f"{where} names them", "environment")

    # -- resolution -------------------------------------------------------------------------

    def resolve(self, executor: Executor) -> Executor:
        """Choose now if still pending; returns the executor the interpreter runs from now on
        (a measured winner's, already prepared, or ``executor`` with the delegates set)."""
        if not self.pending:
            return executor
        self.pending = False
        shapes = list(executor.shapes)
        source = ModelSource.of(self.model.content, self.model_path)
        default = self.mode == "default"
        # Only a program that asked for "auto" itself and named the cache directory itself
        # hears of a cache fault as an error; the default, $OFFLOAD_DELEGATES=auto and
        # $OFFLOAD_AUTO_CACHE_DIR (set for a program, not by it) warn and go on without it.
        strict = self.mode == "auto" and self.source == "argument"
        try:
            selection = select(
                self.model, source, shapes, self.settings, default=default, strict_cache=strict
            )
        except Exception as exc:
            if not default:
                raise
            # The default must not stop a program that ran before it existed.
            warnings.warn(
                f"offload's default delegates could not be chosen ({type(exc).__name__}: "
                f"{exc}); running on the CPU reference",
                stacklevel=4,
            )
            self.source = "error"
            self.why = f"choosing failed: {type(exc).__name__}: {exc}"
            return executor
        self.delegates = list(selection.delegates)
        self.summary = selection.summary
        self.refusals = selection.refusals
        self.source = self.source or {
            "cached": "cache",
            "default": "litert",
            "static": "static rule",
        }.get(selection.summary["mode"], selection.summary["mode"])
        if selection.executor is None:
            executor.delegates = list(self.delegates)
            return executor
        return _adopt(executor, selection.executor)

    def describe(self) -> dict[str, Any]:
        """What ``delegation_report()["default"]`` says: which delegates apply, and why."""
        applied = [d.name for d in self.delegates]
        info: dict[str, Any] = {
            "mode": self.mode,
            "applied": applied or ["cpu"],
            "source": self.source,
            "why": self.why,
        }
        if self.summary is not None:
            info["reason"] = self.summary.get("reason", "")
        return info


def _adopt(old: Executor, new: Executor) -> Executor:
    """``new`` (a measured candidate's executor) as the interpreter's, as if freshly allocated:
    profiling as asked, the inputs the user already set (others zero), state reset."""
    new.profile = None if old.profile is None else {}
    new.reset_variables()
    for i in new.subgraph.inputs:
        mine, theirs = new.buffers[i], old.buffers[i]
        if mine is None:
            continue
        if theirs is not None and theirs.shape == mine.shape and theirs.dtype == mine.dtype:
            new.buffers[i] = np.array(theirs, copy=True)
        elif mine.flags.writeable:
            mine.fill(0)
        else:
            new.buffers[i] = np.zeros_like(mine)
    return new

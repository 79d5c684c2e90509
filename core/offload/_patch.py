"""offload behind LiteRT's imports, for programs that cannot be edited (``offload.patch_litert``).

A program written for ``tflite_runtime.interpreter``, ``ai_edge_litert.interpreter`` or
``tf.lite`` imports those names; while a :class:`LiteRTPatch` is active, the imports give
stand-in modules whose ``Interpreter`` is offload's, with the delegates the patch was given.
Three rules keep this safe:

- offload's own plugins load first, so an engine delegate that runs LiteRT (``litert``)
  keeps the real ``ai_edge_litert.interpreter`` it imported; only later imports see the
  stand-in.
- ``tensorflow`` is stood in for only when asked (``tensorflow=True``, ``offload run
  --tensorflow-stand-in``). Programs probe for TensorFlow (``import tensorflow`` inside
  ``try``, ``importlib.util.find_spec``) to choose a branch, and an import cannot tell a
  probe from a use of ``tf.lite``: a stand-in offered unasked would send them down
  TensorFlow's branch on a machine without TensorFlow. Asked for, only ``tf.lite``'s
  interpreter pieces exist: anything else raises :class:`~offload.errors.StandInError` (or
  :class:`~offload.errors.StandInImportError` for a submodule) naming what was touched.
- :meth:`LiteRTPatch.undo` puts back every module and attribute it replaced.

``offload run`` reaches this from a ``sitecustomize`` (offload/_run_site) that installs a
small finder in the program's process and calls :func:`patch_from_environment` on the first
LiteRT import, so programs that never import LiteRT pay nothing.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import json
import os
import sys
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from offload import compiled_model as _compiled_api
from offload import interpreter as _litert_api
from offload._delegate import Delegate
from offload._formatting import json_default
from offload._interpreter import Interpreter
from offload._plugins import load_delegate, plugin_manager
from offload.errors import StandInError, StandInImportError, UsageError

__all__ = [
    "CONFIG_ENV",
    "REPORT_STARTED_SUFFIX",
    "LiteRTPatch",
    "patch_litert",
    "patch_from_environment",
    "STAND_INS",
]

# What ``offload run`` passes to the program: JSON with the arguments of patch_litert and,
# optionally, ``report_dir``, where each process writes its delegation reports at exit.
CONFIG_ENV = "OFFLOAD_RUN_CONFIG"
# Beside ``process-PID.json`` (written at exit), ``process-PID.started`` is written when the
# patch is installed: a mark with no report beside it is a process that ended without its exit
# handlers (os._exit, a signal, a crash), which offload run must not mistake for one that made
# no interpreter.
REPORT_STARTED_SUFFIX = ".started"

# The modules a patch can stand in for. Packages are only stood in for when the real one is
# not installed (ai_edge_litert) or always (tflite_runtime: nothing in it but the interpreter).
STAND_INS = (
    "tflite_runtime",
    "tflite_runtime.interpreter",
    "ai_edge_litert",
    "ai_edge_litert.interpreter",
    "ai_edge_litert.compiled_model",
    "tensorflow",
    "tensorflow.lite",
    "tensorflow.lite.experimental",
)
_INTERPRETER_NAMES = (
    "Delegate",
    "Interpreter",
    "InterpreterWithCustomOps",
    "OpResolverType",
    "SignatureRunner",
    "load_delegate",
)
_TF_LITE_NAMES = ("Interpreter",)
_TF_EXPERIMENTAL_NAMES = ("load_delegate", "OpResolverType")

_active: LiteRTPatch | None = None
_active_lock = threading.Lock()


@dataclass
class _Record:
    """One interpreter the program made: where from, on what, and its last known report."""

    number: int
    via: str
    model: str
    ref: weakref.ref[Any]
    report: dict[str, Any] | None = None
    error: str = ""

    def snapshot(self, interpreter: Interpreter) -> None:
        try:
            self.report = interpreter.delegation_report()
            self.error = ""
        except Exception as exc:  # a plan that cannot be made is itself the answer to "where"
            self.error = f"{type(exc).__name__}: {exc}"


@dataclass
class LiteRTPatch:
    """An active (or undone) :func:`patch_litert`: what it replaced and what ran where.

    Use it as a context manager, or call :meth:`undo`. :meth:`delegation_report` lists every
    interpreter made through the stand-ins, with the delegates it got and its
    ``Interpreter.delegation_report()``.
    """

    delegates: str | tuple[str, ...] | None
    options: dict[str, dict[str, Any]]
    modules: dict[str, ModuleType] = field(default_factory=dict)
    stood_in_for_tensorflow: bool = False
    active: bool = True
    _saved: dict[str, ModuleType | None] = field(default_factory=dict, repr=False)
    _attributes: list[tuple[ModuleType, str, Any]] = field(default_factory=list, repr=False)
    _finder: _StandInFinder | None = field(default=None, repr=False)
    _records: list[_Record] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __enter__(self) -> LiteRTPatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.undo()

    def undo(self) -> None:
        """Put back every module and attribute the patch replaced; idempotent."""
        global _active
        with _active_lock:
            if not self.active:
                return
            if self._finder is not None and self._finder in sys.meta_path:
                sys.meta_path.remove(self._finder)
            for name in self.modules:
                if sys.modules.get(name) is self.modules[name]:
                    del sys.modules[name]
            for name, previous in self._saved.items():
                if previous is not None:
                    sys.modules[name] = previous
            for parent, attribute, previous in reversed(self._attributes):
                if previous is _MISSING:
                    parent.__dict__.pop(attribute, None)
                else:
                    setattr(parent, attribute, previous)
            for name, module in self.modules.items():
                # A real package imported while patched got the stand-in as an attribute from
                # the import system (ai_edge_litert.interpreter): take it back off.
                parent_name, _, attribute = name.rpartition(".")
                parent = sys.modules.get(parent_name) if parent_name else None
                if parent is not None and parent.__dict__.get(attribute) is module:
                    previous = self._saved.get(name)
                    if previous is not None:
                        setattr(parent, attribute, previous)
                    else:
                        del parent.__dict__[attribute]
            self.active = False
            if _active is self:
                _active = None

    # -- the interpreters the program makes -------------------------------------------------

    def delegates_for(self, app_delegates: Sequence[Delegate]) -> str | list[Delegate] | None:
        """What ``Interpreter(delegates=...)`` gets: the patch's choice, after (and without
        repeating) the delegates the program passed itself as ``experimental_delegates``.

        ``"auto"`` chooses among all delegates itself, so a program that names its own keeps
        them (None: no more are added)."""
        if self.delegates == "auto":
            return None if app_delegates else "auto"
        if self.delegates is None:
            return None
        taken = {d.name for d in app_delegates}
        return [
            load_delegate(name, self.options.get(name))
            for name in _as_tuple(self.delegates)
            if name not in taken
        ]

    def track(self, interpreter: Interpreter, via: str, model: str) -> _Record:
        with self._lock:
            record = _Record(len(self._records) + 1, via, model, weakref.ref(interpreter))
            self._records.append(record)
        return record

    def delegation_report(self) -> list[dict[str, Any]]:
        """Per interpreter made through the stand-ins: ``interpreter`` (1, 2, ...), ``via``
        (the module the program imported), ``model``, ``delegates`` and ``report`` (its
        ``delegation_report()``, or the last one taken before it was freed), or ``error``."""
        rows = []
        for record in list(self._records):
            interpreter = record.ref()
            if interpreter is not None:
                record.snapshot(interpreter)
            report = record.report
            rows.append(
                {
                    "interpreter": record.number,
                    "via": record.via,
                    "model": record.model,
                    "delegates": sorted((report or {}).get("delegates", {})),
                    "report": report,
                    "error": record.error or None,
                }
            )
        return rows


class _Missing:
    pass


_MISSING = _Missing()


# -- stand-in modules ---------------------------------------------------------------------------


def _refuse(module: str, what: str, hint: str) -> Any:
    def __getattr__(name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # copy, pickle and inspect probe dunders: stay quiet
        raise StandInError(
            f"{module}.{name}: this program runs on offload (offload run / patch_litert), whose "
            f"{module!r} stand-in provides {what} only; {hint}"
        )

    return __getattr__


def _interpreter_class(patch: LiteRTPatch, via: str, base: type[Interpreter]) -> type:
    """``base`` with the patch's delegates applied and every instance tracked."""
    signature = inspect.signature(base.__init__)

    class Patched(base):  # type: ignore[valid-type, misc]  # a class made per patch and module
        __doc__ = base.__doc__

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            bound = _arguments(signature, self, args, kwargs)
            if "delegates" not in bound:
                app = list(bound.get("experimental_delegates") or [])
                kwargs["delegates"] = patch.delegates_for(app)
            super().__init__(*args, **kwargs)
            path = bound.get("model_path")
            content = bound.get("model_content")
            model = str(path) if path is not None else f"<model_content, {len(content or b'')} B>"
            self._offload_record = patch.track(self, via, model)

        def allocate_tensors(self) -> None:
            super().allocate_tensors()
            self._offload_record.snapshot(self)

        def __del__(self) -> None:
            # Keep what ran where for the report after the program lets go of the interpreter;
            # only a plan already made is read (planning here would cost the program time).
            record = getattr(self, "_offload_record", None)
            if record is not None and getattr(self, "_executor", None) is not None:
                if self._executor.plan is not None:
                    record.snapshot(self)

    Patched.__init__.__signature__ = signature  # type: ignore[attr-defined]
    Patched.__name__ = Patched.__qualname__ = base.__name__
    Patched.__module__ = via
    return Patched


def _arguments(
    signature: inspect.Signature, self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """The call's arguments by name, those gathered by ``**kwargs`` included (a wrong call
    raises TypeError here, as the constructor itself would)."""
    bound = dict(signature.bind_partial(self, *args, **kwargs).arguments)
    for parameter in signature.parameters.values():
        if parameter.kind is parameter.VAR_KEYWORD:
            bound.update(bound.pop(parameter.name, {}))
    return bound


def _interpreter_module(patch: LiteRTPatch, name: str) -> ModuleType:
    module = ModuleType(name, _litert_api.__doc__)
    for attr in _INTERPRETER_NAMES:
        setattr(module, attr, getattr(_litert_api, attr))
    module.Interpreter = _interpreter_class(patch, name, Interpreter)  # type: ignore[attr-defined]
    custom = _litert_api.InterpreterWithCustomOps
    module.InterpreterWithCustomOps = _interpreter_class(patch, name, custom)  # type: ignore[attr-defined]
    module.DIFFERENCES = _litert_api.DIFFERENCES  # type: ignore[attr-defined]
    module.__getattr__ = _refuse(  # type: ignore[method-assign]
        name, "LiteRT's interpreter module", "see offload.interpreter.DIFFERENCES"
    )
    return module


def _compiled_model_module(name: str) -> ModuleType:
    """LiteRT 2.x's CompiledModel module: offload.compiled_model's names. A CompiledModel
    chooses its delegates by the hardware kinds the program names, so the patch's delegates
    do not apply to it."""
    module = ModuleType(name, _compiled_api.__doc__)
    for attr in _compiled_api.__all__:
        setattr(module, attr, getattr(_compiled_api, attr))
    module.__getattr__ = _refuse(  # type: ignore[method-assign]
        name, "LiteRT's compiled_model module", "see offload.compiled_model.DIFFERENCES"
    )
    return module


def _package(name: str, what: str, hint: str) -> ModuleType:
    module = ModuleType(name, f"offload's stand-in for {name}: {what} only.")
    module.__path__ = []  # a package: submodules are asked of the finder, which refuses them
    module.__getattr__ = _refuse(name, what, hint)  # type: ignore[method-assign]
    return module


_TF_HINT = (
    "install TensorFlow and ask for no stand-in (no --tensorflow-stand-in, no "
    "patch_litert(tensorflow=True)) to use the rest, or run the program without offload"
)


def _tensorflow_modules(patch: LiteRTPatch) -> dict[str, ModuleType]:
    lite_via = "tensorflow.lite"
    interpreters = _interpreter_module(patch, lite_via)
    tf = _package("tensorflow", "tf.lite's Interpreter API", _TF_HINT)
    lite = _package(lite_via, "tf.lite.Interpreter and tf.lite.experimental", _TF_HINT)
    experimental = _package(
        "tensorflow.lite.experimental", "load_delegate and OpResolverType", _TF_HINT
    )
    for attr in _TF_LITE_NAMES:
        setattr(lite, attr, getattr(interpreters, attr))
    for attr in _TF_EXPERIMENTAL_NAMES:
        setattr(experimental, attr, getattr(interpreters, attr))
    lite.experimental = experimental  # type: ignore[attr-defined]
    tf.lite = lite  # type: ignore[attr-defined]
    return {"tensorflow": tf, lite_via: lite, "tensorflow.lite.experimental": experimental}


class _StandInLoader(importlib.abc.Loader):
    def __init__(self, module: ModuleType) -> None:
        self.module = module

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return self.module

    def exec_module(self, module: ModuleType) -> None:
        pass  # built complete by the patch


class _StandInFinder(importlib.abc.MetaPathFinder):
    """First on ``sys.meta_path`` while a patch is active: answers for the stand-ins."""

    def __init__(self, modules: Mapping[str, ModuleType], packages: Sequence[str]) -> None:
        self.modules = dict(modules)
        self.packages = tuple(packages)  # stood-in packages whose other submodules are refused

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        module = self.modules.get(fullname)
        if module is not None:
            is_package = hasattr(module, "__path__")
            spec = importlib.machinery.ModuleSpec(
                fullname, _StandInLoader(module), is_package=is_package, origin="offload"
            )
            if is_package:
                spec.submodule_search_locations = []
            return spec
        root = next((p for p in self.packages if fullname.startswith(p + ".")), None)
        if root is not None:
            raise StandInImportError(
                f"No module named {fullname!r}: this program runs on offload (offload run / "
                f"patch_litert), whose {root!r} stand-in has "
                f"{', '.join(sorted(n for n in self.modules if n.startswith(root)))} only; "
                + (_TF_HINT if root == "tensorflow" else f"install the real {root} to use it"),
                name=fullname,
            )
        return None


# -- installing and undoing -----------------------------------------------------------------------


def _installed(name: str) -> bool:
    """Whether ``name`` is importable without any patch (its spec is found, nothing runs)."""
    if name in sys.modules:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _normalise(
    delegates: str | Sequence[str] | None, options: Mapping[str, Mapping[str, Any]] | None
) -> tuple[str | tuple[str, ...] | None, dict[str, dict[str, Any]]]:
    if isinstance(delegates, str) and delegates != "auto":
        delegates = (delegates,)  # one delegate by name, as Interpreter(delegates="x") takes it
    if delegates is not None and not isinstance(delegates, str):
        delegates = tuple(delegates)
        bad = [d for d in delegates if not isinstance(d, str)]
        if bad:
            raise UsageError(
                f"patch_litert(delegates=...) expects delegate names, found {bad!r}: each "
                "interpreter the program makes gets delegates of its own, built from the names"
            )
        if "auto" in delegates and len(delegates) > 1:
            raise UsageError("'auto' picks the delegates itself: pass delegates='auto' alone")
        if delegates == ("auto",):
            delegates = "auto"
    opts = {str(k): dict(v) for k, v in (options or {}).items()}
    named = set() if delegates is None or delegates == "auto" else set(_as_tuple(delegates))
    stray = sorted(set(opts) - named)
    if stray:
        raise UsageError(
            f"patch_litert: options given for {stray}, which are not among the delegates "
            f"{sorted(named)}"
        )
    return delegates, opts


def _as_tuple(delegates: str | tuple[str, ...]) -> tuple[str, ...]:
    return (delegates,) if isinstance(delegates, str) else delegates


def patch_litert(
    delegates: str | Sequence[str] | None = None,
    *,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    tensorflow: bool | None = None,
) -> LiteRTPatch:
    """Put offload behind ``tflite_runtime.interpreter``, ``ai_edge_litert.interpreter``,
    ``ai_edge_litert.compiled_model`` and ``tensorflow.lite`` in this process, until
    :meth:`LiteRTPatch.undo`. A CompiledModel chooses delegates by the hardware kinds the
    program names; ``delegates`` applies to the interpreters.

    Args:
        delegates: what every interpreter the program makes gets, after the delegates it
            passes itself: None for offload's defaults (as LiteRT applies XNNPACK), ``[]`` for
            the CPU reference alone, delegate names in priority order, or ``"auto"``.
        options: per delegate name, its options (as ``offload.load_delegate`` takes them).
        tensorflow: True to stand in for ``tensorflow`` too (``tf.lite``'s interpreter
            pieces only; a real TensorFlow is hidden while the patch is active). None (the
            default) and False leave ``tensorflow`` alone, so that a program probing for
            TensorFlow takes the branch it takes without offload.

    Call it before the program imports LiteRT: a module that already did
    ``from tflite_runtime.interpreter import Interpreter`` keeps the class it got. Delegate
    names are checked now: an unknown or unavailable delegate raises here, not in the program.
    """
    global _active
    names, opts = _normalise(delegates, options)
    if names not in (None, "auto"):
        for name in _as_tuple(names):  # fail here, with the reason, not in the program
            load_delegate(name, opts.get(name))
    # Plugins first: an engine delegate that runs LiteRT binds the real module before the
    # stand-in replaces it in sys.modules.
    plugin_manager()
    with _active_lock:
        if _active is not None and _active.active:
            raise UsageError("patch_litert() is already active; undo() it before patching again")
        stand_in_tf = bool(tensorflow)  # only when asked: see the module docstring
        patch = LiteRTPatch(names, opts, stood_in_for_tensorflow=stand_in_tf)
        modules: dict[str, ModuleType] = {
            "tflite_runtime": _package(
                "tflite_runtime", "tflite_runtime.interpreter", "see offload.interpreter"
            ),
            "tflite_runtime.interpreter": _interpreter_module(patch, "tflite_runtime.interpreter"),
            "ai_edge_litert.interpreter": _interpreter_module(patch, "ai_edge_litert.interpreter"),
            "ai_edge_litert.compiled_model": _compiled_model_module(
                "ai_edge_litert.compiled_model"
            ),
        }
        modules["tflite_runtime"].interpreter = modules["tflite_runtime.interpreter"]  # type: ignore[attr-defined]
        packages = ["tflite_runtime"]
        if not _installed("ai_edge_litert"):
            modules["ai_edge_litert"] = _package(
                "ai_edge_litert",
                "ai_edge_litert.interpreter and ai_edge_litert.compiled_model",
                "install ai-edge-litert for the rest of LiteRT",
            )
            modules["ai_edge_litert"].interpreter = modules["ai_edge_litert.interpreter"]  # type: ignore[attr-defined]
            modules["ai_edge_litert"].compiled_model = modules["ai_edge_litert.compiled_model"]  # type: ignore[attr-defined]
            packages.append("ai_edge_litert")
        if stand_in_tf:
            modules.update(_tensorflow_modules(patch))
            packages.append("tensorflow")
        patch.modules = modules
        _install(patch, packages)
        _active = patch
    return patch


def _install(patch: LiteRTPatch, packages: Sequence[str]) -> None:
    """Replace what is imported already (the real ``ai_edge_litert.interpreter`` a plugin
    imported, for one); the finder answers for what is imported later, and the import system
    then sets the parent package's attribute itself."""
    for name, module in patch.modules.items():
        previous = sys.modules.get(name)
        if previous is None:
            continue
        patch._saved[name] = previous
        sys.modules[name] = module
        parent_name, _, attribute = name.rpartition(".")
        parent = sys.modules.get(parent_name) if parent_name else None
        if parent is not None and parent_name not in patch.modules:  # a real package's attribute
            patch._attributes.append((parent, attribute, parent.__dict__.get(attribute, _MISSING)))
            setattr(parent, attribute, module)
    patch._finder = _StandInFinder(patch.modules, packages)
    sys.meta_path.insert(0, patch._finder)


# -- offload run ---------------------------------------------------------------------------------


def patch_from_environment() -> LiteRTPatch | None:
    """The patch ``offload run`` asked for in :data:`CONFIG_ENV` (None when not set), with the
    report written at exit to the directory it names."""
    text = os.environ.get(CONFIG_ENV)
    if not text:
        return None
    config = json.loads(text)
    patch = patch_litert(
        config.get("delegates"),
        options=config.get("options"),
        tensorflow=config.get("tensorflow"),
    )
    report_dir = config.get("report_dir")
    if report_dir:
        _mark_started(Path(report_dir))
        atexit.register(_write_report, patch, Path(report_dir))
    return patch


def _mark_started(directory: Path) -> None:
    path = directory / f"process-{os.getpid()}{REPORT_STARTED_SUFFIX}"
    try:
        path.write_text(json.dumps({"pid": os.getpid(), "argv": sys.argv}, default=str))
    except OSError:  # the report at exit says what went wrong with the folder
        pass


def _write_report(patch: LiteRTPatch, directory: Path) -> None:
    rows = patch.delegation_report()
    document = {"pid": os.getpid(), "argv": sys.argv, "interpreters": rows}
    path = directory / f"process-{os.getpid()}.json"
    # Written aside and renamed: a process killed while writing leaves no half a report, which
    # offload run would read as unreadable rather than as missing.
    partial = path.with_name(path.name + ".partial")
    try:
        partial.write_text(json.dumps(document, default=json_default))
        os.replace(partial, path)
    except OSError as exc:  # the program's own exit status must not change for a report
        print(f"offload run: could not write the delegation report: {exc}", file=sys.stderr)

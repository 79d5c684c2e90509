"""Plugin discovery and the loading policy.

Policy (tested in tests/test_plugins.py):

* Plugins are the entry points of group ``offload.delegates``; each is imported and registered
  with a pluggy PluginManager under the entry point's name.
* A plugin whose import fails is recorded with its name and error, and a warning says so once.
  The host keeps working: the CPU reference and the other plugins are unaffected. Asking for a
  delegate of that plugin by name raises :class:`PluginImportError` with the original error.
  "Fails" means any exception, ``SystemExit`` and ``GeneratorExit`` included: plugin code must
  not be able to end the host's process (``offload delegates``, ``delegates="auto"``). Only
  ``KeyboardInterrupt`` passes through, since that is the user asking to stop. The same holds
  for the hooks a plugin implements and for every ``availability()`` probe.
* A delegate that is installed but cannot run here (no OpenCL device, not macOS) is
  *unavailable*: listed with its reason, skipped by ``delegates="auto"``, and raised
  (:class:`DelegateUnavailableError`) only when asked for by name.
* ``OFFLOAD_DISABLE_PLUGIN_AUTOLOAD=1`` loads no plugin, except those named in
  ``OFFLOAD_PLUGINS=a,b``; with auto-loading on, ``OFFLOAD_PLUGINS`` restricts loading to
  the named ones. The CPU reference is not a plugin and cannot be disabled.
* Hooks are checked against :mod:`offload.hookspecs` when a plugin registers, as pytest
  does with its plugins, but stricter: a module-level function named ``offload_*`` that lacks
  ``@offload.hookimpl`` makes the plugin invalid (pytest would still call it by name), as does
  a misspelt hook name (pytest's ``check_pending`` error: "unknown hook") or an argument the
  spec lacks. Either would otherwise give a plugin that "loads" and provides nothing.
* Every hook is called one way, through pluggy, one plugin at a time (:func:`call_hook`), so
  that each result is attributed to its plugin and a failing plugin fails alone.
* A capability declaration that cannot be valid (raised while the plugin imports, or returned
  by its hook) makes the plugin invalid, with the op and the field named.
* ``load_delegate("path/to/file.py" | "package.module")`` loads a delegate that is not
  installed, like LiteRT's ``--external_delegate_path``, with the same hook checks.
* ``load_delegate("path/to/libdelegate.so", options)``: a LiteRT C delegate library is native
  code that only LiteRT loads. It goes to the delegate a plugin's
  ``offload_native_library_delegate`` hook returns (``litert``, from offload-litert), which
  has LiteRT apply it to the partitions it runs; without one, the error says what to install.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import sys
import traceback
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from offload._delegate import Availability, Delegate, DelegateOptions
from offload._deprecation import deprecation, renamed_parameter
from offload._plugin_checks import (
    _availability,
    _describe,
    _new_manager,
    _validate_delegate,
    call_hook,
    declared,
    register_checked,
)
from offload._providers import DelegateProvider
from offload.errors import (
    CapabilityDeclarationError,
    DelegateOptionsError,
    DelegateUnavailableError,
    PluginError,
    PluginHookError,
    PluginImportError,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "PluginRecord",
    "DelegateRecord",
    "plugin_manager",
    "reload_plugins",
    "list_plugins",
    "list_delegates",
    "load_delegate",
    "delegate_class",
    "delegate_providers",
    "call_hook",
    "is_native_library",
    "native_library_delegate",
]

ENTRY_POINT_GROUP = "offload.delegates"
DISABLE_AUTOLOAD_ENV = "OFFLOAD_DISABLE_PLUGIN_AUTOLOAD"
PLUGINS_ENV = "OFFLOAD_PLUGINS"


@dataclass(frozen=True)
class DelegateRecord:
    """A delegate class found in a plugin, with its availability on this machine."""

    name: str
    cls: type[Delegate]
    plugin: str
    version: str
    availability: Availability


@dataclass
class PluginRecord:
    """One entry point of the ``offload.delegates`` group and what became of it."""

    name: str
    distribution: str
    version: str
    status: str  # "loaded", "import-error", "invalid", "skipped"
    error: str = ""
    delegates: list[DelegateRecord] = field(default_factory=list)
    # The failure itself (for ``raise ... from``) and its formatted traceback (for people).
    exception: BaseException | None = field(default=None, repr=False, compare=False)
    traceback: str = field(default="", repr=False, compare=False)

    def fail(self, status: str, exc: BaseException, hook: str = "") -> None:
        """Record ``exc`` (raised by ``hook``, if given) as why this plugin did not load."""
        self.status = status
        self.error = str(exc) if isinstance(exc, PluginError) else _describe(exc)
        if hook and not isinstance(exc, PluginError):
            self.error += f" (raised by hook {hook})"
        self.exception = exc
        self.traceback = "".join(traceback.format_exception(exc))


class _Registry:
    def __init__(self) -> None:
        self.pm = _new_manager()
        self.plugins: dict[str, PluginRecord] = {}
        self.delegates: dict[str, DelegateRecord] = {}
        self.providers: list[DelegateProvider] = []


_registry: _Registry | None = None


def _wanted_names() -> tuple[bool, set[str] | None]:
    autoload = os.environ.get(DISABLE_AUTOLOAD_ENV, "").strip().lower() not in ("1", "true", "yes")
    named = os.environ.get(PLUGINS_ENV, "")
    names = {n.strip() for n in named.split(",") if n.strip()}
    return autoload, (names or None)


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    return sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)


def _distribution_of(ep: importlib.metadata.EntryPoint) -> tuple[str, str]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "?", "?"
    return dist.metadata["Name"] or "?", dist.version or "?"


def _providers_of(
    reg: _Registry, record: PluginRecord, found: list[Any], delegates: list[DelegateRecord]
) -> list[DelegateProvider]:
    """``found`` as checked DelegateProviders: for this plugin's delegates and their options,
    with flags no other plugin added."""
    mine = {d.name: d.cls for d in delegates}
    taken = {
        flag: p.delegate
        for p in reg.providers
        for flag in (p.enable_flag, *(f.flag for f in p.flags))
    }
    providers = []
    for item in found:
        where = f"plugin {record.name!r}: offload_delegate_providers"
        provider = declared(DelegateProvider, item, f"{where} returned an invalid provider")
        if provider.delegate not in mine:
            raise CapabilityDeclarationError(
                f"{where}: flags for delegate {provider.delegate!r}, expected one of this "
                f"plugin's delegates {sorted(mine)}"
            )
        fields = mine[provider.delegate].Options.model_fields
        for flag in provider.flags:
            if flag.option not in fields:
                raise CapabilityDeclarationError(
                    f"{where}: {flag.flag} sets option {flag.option!r}, which delegate "
                    f"{provider.delegate!r} does not have (its options: {sorted(fields)})"
                )
        for name in (provider.enable_flag, *(f.flag for f in provider.flags)):
            if name in taken:
                raise CapabilityDeclarationError(
                    f"{where}: flag {name} is already added for delegate {taken[name]!r}"
                )
            taken[name] = provider.delegate
        providers.append(provider)
    return providers


def _register_plugin(reg: _Registry, obj: Any, record: PluginRecord) -> None:
    hook = ""
    try:
        register_checked(reg.pm, obj, record.name)
        if not reg.pm.get_hookcallers(obj):
            raise PluginHookError(
                f"plugin {record.name!r}: {_where(obj)} implements no offload hook; expected at "
                f"least offload_register_delegates marked with @offload.hookimpl (is the entry "
                f"point naming the right module?)"
            )
        hook = "offload_register_delegates"
        records = []
        for cls in call_hook(reg.pm, record.name, hook):
            checked = _validate_delegate(cls, record.name)
            records.append(
                DelegateRecord(
                    checked.name, checked, record.name, checked.version, _availability(checked)
                )
            )
        hook = "offload_delegate_providers"
        providers = _providers_of(reg, record, call_hook(reg.pm, record.name, hook), records)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a hook's SystemExit is this plugin's failure, not the host's
        if reg.pm.has_plugin(record.name):
            reg.pm.unregister(name=record.name)
        record.fail("invalid", exc, hook)
        warnings.warn(f'offload plugin "{record.name}" is invalid: {record.error}', stacklevel=3)
        return
    for rec in records:
        if rec.name in reg.delegates:
            warnings.warn(
                f"delegate {rec.name!r} from plugin {record.name!r} is also provided by plugin "
                f"{reg.delegates[rec.name].plugin!r}; keeping the first",
                stacklevel=3,
            )
            continue
        reg.delegates[rec.name] = rec
        record.delegates.append(rec)
    reg.providers.extend(providers)
    record.status = "loaded"


def _where(obj: Any) -> str:
    """What an entry point resolved to, with its file: the first thing to check when a plugin
    provides nothing (a same-named folder on sys.path can shadow the installed package)."""
    name = getattr(obj, "__name__", type(obj).__name__)
    path = getattr(obj, "__file__", None) or list(getattr(obj, "__path__", []) or [])
    return f"{name!r} ({path})" if path else repr(name)


def _load() -> _Registry:
    reg = _Registry()
    autoload, names = _wanted_names()
    for ep in _entry_points():
        dist, version = _distribution_of(ep)
        record = PluginRecord(ep.name, dist, version, "skipped")
        reg.plugins[ep.name] = record
        if names is not None and ep.name not in names:
            record.error = f"not named in {PLUGINS_ENV}"
            continue
        if not autoload and names is None:
            record.error = f"{DISABLE_AUTOLOAD_ENV} is set"
            continue
        try:
            obj = ep.load()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # e.g. sys.exit() at import time: contain it like any error
            if isinstance(exc, CapabilityDeclarationError):  # imports fine, declares nonsense
                record.fail("invalid", exc)
                warnings.warn(
                    f'offload plugin "{ep.name}" is invalid: {record.error}', stacklevel=3
                )
                continue
            record.fail("import-error", exc)
            warnings.warn(
                f'Error importing offload plugin "{ep.name}" ({dist} {version}): {record.error}',
                stacklevel=3,
            )
            continue
        _register_plugin(reg, obj, record)
    return reg


def plugin_manager() -> _Registry:
    """The process-wide registry, loading plugins on first use."""
    global _registry
    if _registry is None:
        _registry = _load()
    return _registry


def reload_plugins() -> None:
    """Forget loaded plugins and discover them again (after installing one, or in tests)."""
    global _registry
    _registry = None


def list_plugins() -> list[PluginRecord]:
    return list(plugin_manager().plugins.values())


def list_delegates() -> list[DelegateRecord]:
    """Every delegate class found, available or not, sorted by name."""
    return sorted(plugin_manager().delegates.values(), key=lambda r: r.name)


def delegate_providers() -> list[DelegateProvider]:
    return list(plugin_manager().providers)


def delegate_class(name: str) -> type[Delegate]:
    """The installed delegate class called ``name``; raises with what is installed instead."""
    reg = plugin_manager()
    if name in reg.delegates:
        return reg.delegates[name].cls
    for record in reg.plugins.values():
        if record.name == name and isinstance(record.exception, PluginError):
            # It imported; what it declares or hooks is wrong: the same error class it got.
            raise type(record.exception)(
                f'offload plugin "{name}" is invalid: {record.error}'
            ) from record.exception
        if record.name == name and record.status in ("import-error", "invalid"):
            raise PluginImportError(
                f'offload plugin "{name}" failed to load: {record.error}'
            ) from record.exception
        if record.name == name and record.status == "skipped":
            raise PluginError(f'offload plugin "{name}" was not loaded: {record.error}')
    known = ", ".join(sorted(reg.delegates)) or "none"
    raise PluginError(f"no delegate named {name!r} is installed (installed delegates: {known})")


def _module_from_path(path: Path) -> ModuleType:
    module_name = f"offload_external_{path.stem}_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise PluginImportError(f"cannot import a delegate from {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        del sys.modules[module_name]
        if isinstance(exc, KeyboardInterrupt):
            raise
        if isinstance(exc, CapabilityDeclarationError):
            raise CapabilityDeclarationError(f'external delegate "{path}": {exc}') from exc
        raise PluginImportError(
            f'Error importing external delegate "{path}": {_describe(exc)}'
        ) from exc
    return module


def _external_delegate_class(target: str) -> type[Delegate]:
    path = Path(target)
    if target.endswith(".py") or path.exists():
        if not path.is_file():
            raise PluginImportError(f"external delegate {target!r}: no such file")
        module = _module_from_path(path)
    else:
        try:
            module = importlib.import_module(target)
        except KeyboardInterrupt:
            raise
        except CapabilityDeclarationError as exc:
            raise CapabilityDeclarationError(f'external delegate "{target}": {exc}') from exc
        except BaseException as exc:
            raise PluginImportError(
                f'Error importing external delegate "{target}": {_describe(exc)}'
            ) from exc
    # The same checks as an installed plugin's, in a manager of its own: a one-off delegate
    # is not listed with the installed ones.
    pm = _new_manager()
    register_checked(pm, module, target)
    hook = "offload_register_delegates"
    classes: list[Any] = []
    if getattr(pm.hook, hook).get_hookimpls():
        try:
            classes = call_hook(pm, target, hook)
        except KeyboardInterrupt:
            raise
        except PluginError:
            raise
        except BaseException as exc:
            raise PluginImportError(
                f"external delegate {target!r}: {hook} raised {_describe(exc)}"
            ) from exc
    else:  # no hook: the module's one Delegate subclass, like LiteRT's external delegate
        classes = [
            v
            for v in vars(module).values()
            if isinstance(v, type)
            and issubclass(v, Delegate)
            and v is not Delegate
            and v.name
            and v.__module__ == module.__name__
        ]
    if len(classes) != 1:
        found = ", ".join(getattr(c, "name", repr(c)) for c in classes) or "none"
        raise PluginError(
            f"external delegate {target!r}: expected exactly one offload.Delegate subclass "
            f"(or an offload_register_delegates hook), found {found}"
        )
    return _validate_delegate(classes[0], target)


# What a LiteRT C delegate library is called on each platform (``libedgetpu.so.1`` too).
_NATIVE_SUFFIXES = (".so", ".dylib", ".dll")


def is_native_library(name: str) -> bool:
    """Whether ``name`` names a native shared library (a LiteRT C delegate), by its file name."""
    base = os.path.basename(str(name))
    return base.endswith(_NATIVE_SUFFIXES) or ".so." in base


def native_library_delegate(
    library: str, options: Mapping[str, Any] | None = None, *, allow_unavailable: bool = False
) -> Delegate:
    """The delegate that has LiteRT apply the C delegate library ``library`` (with the
    library's own ``options``) to the partitions it runs.

    Each loaded plugin's ``offload_native_library_delegate`` hook is asked, by plugin name,
    and the first delegate that can run here is taken; after them, an installed delegate
    class that sets the deprecated ``runs_native_delegates``. Raises
    :class:`DelegateUnavailableError` with the reason when none of those can run here (with
    ``allow_unavailable``, the first is returned instead), and :class:`PluginError` saying
    what to install when there is none.
    """
    reg = plugin_manager()
    given = dict(options or {})
    # The answers that cannot run here: a hook's delegate, or a deprecated runner class.
    unavailable: list[tuple[Availability, Delegate | type[Delegate]]] = []
    hook = "offload_native_library_delegate"
    for record in sorted(reg.plugins.values(), key=lambda r: r.name):
        if record.status != "loaded":
            continue
        answers = call_hook(reg.pm, record.name, hook, lists=False, library=library, options=given)
        for found in answers:
            if not isinstance(found, Delegate):
                raise PluginError(
                    f"plugin {record.name!r}: hook {hook} returned {found!r}, expected an "
                    "offload.Delegate or None"
                )
            availability = _availability(type(found))
            if availability.available:
                return found
            unavailable.append((availability, found))
    for rec in sorted(reg.delegates.values(), key=lambda r: r.name):
        if rec.cls.runs_native_delegates:  # deprecated: warned when the class was defined
            if rec.availability.available:
                return rec.cls.for_native_library(library, given)
            unavailable.append((rec.availability, rec.cls))
    if unavailable:
        availability, first = unavailable[0]
        if allow_unavailable:
            return (
                first if isinstance(first, Delegate) else first.for_native_library(library, given)
            )
        raise DelegateUnavailableError(
            f"delegate {first.name!r}, which applies LiteRT C delegate libraries such as "
            f"{library!r}, is installed but unavailable here: {availability.reason}"
        )
    failed = [
        f"{p.name} ({p.status}: {p.error})"
        for p in reg.plugins.values()
        if p.status in ("import-error", "invalid")
    ]
    broken = f"; plugins that failed to load: {', '.join(failed)}" if failed else ""
    raise PluginError(
        f"{library!r} is a LiteRT C delegate library (native code, not a Python delegate); "
        "offload has LiteRT apply such libraries through the 'litert' delegate, and no "
        f"installed delegate does that: install it with pip install offload-litert{broken}"
    )


# LiteRT's load_delegate(library, options=None): offload's first parameter had another name.
_LOAD_DELEGATE_NAME = deprecation(
    "load_delegate-name",
    old="load_delegate(name=...)",
    new="load_delegate(library=...), LiteRT's name for it (or pass it positionally)",
    since="0.2.0",
    removal="0.3.0",
)


@renamed_parameter(_LOAD_DELEGATE_NAME, "name", "library")
def load_delegate(
    library: str, options: Mapping[str, Any] | DelegateOptions | None = None
) -> Delegate:
    """A configured delegate, by installed name or from a module path (LiteRT's load_delegate).

    ``library`` is an installed delegate's name (``"gpu_opencl"``), an importable module or a
    ``.py`` file that registers one, or a LiteRT C delegate library. A native library
    (``x.so``, ``x.dylib``, ``x.dll``) is a LiteRT C delegate: it is applied by LiteRT, through
    the installed delegate that runs such libraries (``litert``), and ``options`` are the
    library's own. Raises :class:`DelegateUnavailableError` with the
    reason when the delegate cannot run here.
    """
    name = library
    if name not in plugin_manager().delegates and is_native_library(name):
        if isinstance(options, DelegateOptions):
            raise DelegateOptionsError(
                f"options for the LiteRT C delegate library {name!r} are the library's own "
                f"(a mapping of names to values), found {type(options).__name__}"
            )
        return native_library_delegate(name, options)
    if name in plugin_manager().delegates:
        cls = delegate_class(name)
    elif name.endswith(".py") or "/" in name or os.sep in name or "." in name:
        cls = _external_delegate_class(name)
    else:
        cls = delegate_class(name)
    availability = _availability(cls)
    if not availability.available:
        raise DelegateUnavailableError(
            f"delegate {cls.name!r} is installed but unavailable here: {availability.reason}"
        )
    return cls(options)

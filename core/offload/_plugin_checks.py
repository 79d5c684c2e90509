"""What offload checks of a plugin before it trusts what the plugin gives.

Its hooks are registered against :mod:`offload.hookspecs` (:func:`register_checked`) and
called one plugin at a time (:func:`call_hook`); each delegate class it registers must be a
valid :class:`~offload.Delegate` (:func:`_validate_delegate`), and its availability probe may
fail in any way without ending the host (:func:`_availability`). The loading policy these
serve is offload._plugins'.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Mapping
from typing import Any, TypeVar

import pluggy
from pydantic import BaseModel, ValidationError

from offload import hookspecs
from offload._capabilities import Capabilities, describe_validation_error
from offload._delegate import Availability, Delegate, DelegateOptions
from offload.errors import CapabilityDeclarationError, PluginError, PluginHookError

HOOK_PREFIX = "offload_"

_Model = TypeVar("_Model", bound=BaseModel)


def _describe(exc: BaseException) -> str:
    """``SystemExit: 3``; the bare type name when the exception carries no message."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _new_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    return pm


def declared(model: type[_Model], item: Any, what: str) -> _Model:
    """``item`` (a mapping a plugin gave) as ``model``, or CapabilityDeclarationError: ``what``,
    then each problem with its field."""
    try:
        return model.model_validate(item)
    except ValidationError as exc:
        problems = describe_validation_error(exc, item, model.__name__)
        raise CapabilityDeclarationError(f"{what}: {problems}") from None


def _validate_delegate(cls: Any, plugin: str) -> type[Delegate]:
    if not (isinstance(cls, type) and issubclass(cls, Delegate)):
        raise CapabilityDeclarationError(
            f"plugin {plugin!r}: offload_register_delegates returned {cls!r}, "
            "expected a subclass of offload.Delegate"
        )
    if not cls.name:
        raise CapabilityDeclarationError(f"plugin {plugin!r}: {cls.__name__} has an empty name")
    caps = getattr(cls, "CAPABILITIES", None)
    if isinstance(caps, Mapping):
        cls.CAPABILITIES = declared(
            Capabilities,
            caps,
            f"plugin {plugin!r}: delegate {cls.name!r} declares invalid capabilities",
        )
    elif not isinstance(caps, Capabilities):
        raise CapabilityDeclarationError(
            f"plugin {plugin!r}: delegate {cls.name!r} must declare CAPABILITIES as "
            f"offload.Capabilities, found {type(caps).__name__}"
        )
    if not (isinstance(cls.Options, type) and issubclass(cls.Options, DelegateOptions)):
        raise CapabilityDeclarationError(
            f"plugin {plugin!r}: delegate {cls.name!r} Options must subclass "
            "offload.DelegateOptions"
        )
    return cls


def _availability(cls: type[Delegate]) -> Availability:
    """``cls.availability()``, where a probe that fails in any way means "cannot run here"."""
    try:
        result = cls.availability()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit from a probe must not end the host either
        return Availability(False, f"availability check raised {_describe(exc)}")
    if not isinstance(result, Availability):
        return Availability(False, f"availability() returned {result!r}, expected Availability")
    return result


def _hook_names() -> list[str]:
    return sorted(n for n in vars(hookspecs) if n.startswith(HOOK_PREFIX))


def register_checked(pm: pluggy.PluginManager, obj: Any, name: str) -> None:
    """Register ``obj`` as plugin ``name`` with its hooks checked against the hookspecs.

    Raises :class:`PluginHookError` naming the plugin, the hook and the argument; ``obj`` is
    then not registered.
    """
    unmarked = [
        attr
        for attr in dir(obj)
        if attr.startswith(HOOK_PREFIX)
        and inspect.isroutine(getattr(obj, attr, None))
        and pm.parse_hookimpl_opts(obj, attr) is None
    ]
    if unmarked:
        raise PluginHookError(
            f"plugin {name!r}: {', '.join(unmarked)} not marked with @offload.hookimpl "
            f"(names starting with {HOOK_PREFIX!r} are reserved for hooks; mark the function "
            "or rename it)"
        )
    try:
        pm.register(obj, name=name)
    except pluggy.PluginValidationError as exc:
        # pluggy may have half-registered the plugin before finding the bad hook.
        if pm.has_plugin(name):
            pm.unregister(name=name)
        raise PluginHookError(f"plugin {name!r}: {' '.join(str(exc).split())}") from exc
    unknown = sorted(
        caller.name
        for caller in pm.get_hookcallers(obj) or []
        if caller.spec is None
        and any(i.plugin is obj and not i.optionalhook for i in caller.get_hookimpls())
    )
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        pm.unregister(name=name)
        if not unknown:
            raise PluginHookError(f"plugin {name!r}: {' '.join(str(exc).split())}") from exc
        hints = []
        for hook in unknown:
            close = difflib.get_close_matches(hook, _hook_names(), n=1)
            hints.append(f"{hook!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise PluginHookError(
            f"plugin {name!r}: unknown hook {', '.join(hints)}; offload's hooks are {_hook_names()}"
        ) from exc


def call_hook(
    pm: pluggy.PluginManager, plugin: str, hook: str, *, lists: bool = True, **kwargs: Any
) -> list[Any]:
    """The results of ``hook`` from plugin ``plugin`` alone, called through pluggy.

    The one way offload calls a hook: per plugin, so that results are attributed to it and an
    exception is that plugin's alone. Each result, a list or tuple, is flattened; with
    ``lists=False`` (a hook that returns one object) the results are returned as they are,
    None left out.
    """
    obj = pm.get_plugin(plugin)
    others = [p for p in pm.get_plugins() if p is not obj]
    results = pm.subset_hook_caller(hook, remove_plugins=others)(**kwargs)
    if not lists:
        return list(results)
    flat: list[Any] = []
    for result in results:
        if isinstance(result, (list, tuple)):
            flat.extend(result)
        else:
            raise PluginError(
                f"plugin {plugin!r}: hook {hook} returned {result!r}, expected a list"
            )
    return flat

"""Every hook a plugin can implement, in one place. All hook names start with ``offload_``.

A plugin is a module (or object) registered in the ``offload.delegates`` entry-point group
whose functions are marked with :data:`offload.hookimpl`::

    import offload

    @offload.hookimpl
    def offload_register_delegates():
        return [MyDelegate]

Hooks are called with keyword arguments, through pluggy, one plugin at a time, so that each
result is attributed to the plugin that returned it. When a plugin registers, its hooks are
checked against the specs below: a module-level function named ``offload_*`` without
``@offload.hookimpl``, a name no spec has, or an argument the spec lacks makes the plugin
invalid, with the plugin, the hook and the argument named. (``@offload.hookimpl(
optionalhook=True)`` marks a hook for a newer offload that this one may not know.) The guide
with every declaration field is docs/delegate-authors.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping
    from typing import Any

    from offload._delegate import Delegate
    from offload._providers import DelegateProvider

PROJECT = "offload"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

# -- delegates ---------------------------------------------------------------------------


@hookspec
def offload_register_delegates() -> list[type[Delegate]]:
    """Return the delegate classes this plugin provides.

    Each class is checked when the plugin loads: it must subclass :class:`offload.Delegate`,
    set a non-empty ``name`` and declare valid ``CAPABILITIES``; a declaration that cannot be
    valid is reported with the plugin's name, the op and the field.

    :return: a list of :class:`offload.Delegate` subclasses.
    """


@hookspec
def offload_native_library_delegate(library: str, options: Mapping[str, Any]) -> Delegate | None:
    """Return a delegate that has LiteRT apply the C delegate library ``library`` to the
    partitions it runs, or None where this plugin runs no such libraries.

    ``offload.load_delegate("x.so", options)`` and ``--external_delegate_path x.so`` come
    here: a LiteRT C delegate (``.so``, ``.dylib``, ``.dll``) is native code that only LiteRT
    loads, so offload hands it to a delegate that runs its partitions in LiteRT (the ``litert``
    delegate of offload-litert). Options the library refuses raise
    :class:`~offload.errors.DelegateOptionsError`. As LiteRT's ``load_delegate`` does, make
    the library's delegate instance here, once, and share it with every partition and
    interpreter the returned delegate is given, until the last of them lets go.

    Return the delegate even where it cannot run here (build it without touching the engine,
    as any delegate builds without its hardware): offload asks its class's ``availability()``
    and raises :class:`~offload.errors.DelegateUnavailableError` with the reason, or plans
    with it where only the plan is wanted.

    :param library: the library, as the user named it (a path or a file name).
    :param options: the library's own options, names to values.
    :return: a configured :class:`offload.Delegate`, or None.
    """


# -- command line ------------------------------------------------------------------------


@hookspec
def offload_delegate_providers() -> list[DelegateProvider]:
    """Return the command-line flags this plugin adds to every offload tool.

    Like LiteRT's delegate providers (``--use_gpu``, ``--gpu_precision_loss_allowed``): one
    flag switches the delegate on, the others set its options. Checked at load: each provider
    is for a delegate this plugin registers, each flag sets a field of that delegate's
    Options, and no flag is taken by another plugin.

    :return: a list of :class:`offload.DelegateProvider`.
    """


@hookspec
def offload_add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add sub-commands to the ``offload`` command line (e.g. ``offload export-coreml``).

    A command sets ``func`` with ``parser.set_defaults(func=...)``; ``func(args)`` returns the
    process exit code.

    :param subparsers: the ``offload`` parser's sub-command collection.
    """

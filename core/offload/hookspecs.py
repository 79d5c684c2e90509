"""Every hook a plugin can implement, in one place. All hook names start with ``offload_``.

A plugin is a module (or object) registered in the ``offload.delegates`` entry-point group
whose functions are marked with :data:`offload.hookimpl`::

    import offload

    @offload.hookimpl
    def offload_register_delegates():
        return [MyDelegate]

Hooks are called with keyword arguments; every implementation's results are collected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    import argparse

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
    set a non-empty ``name`` and declare valid ``CAPABILITIES``; a malformed declaration is
    reported with the plugin's name.

    :return: a list of :class:`offload.Delegate` subclasses.
    """


# -- command line ------------------------------------------------------------------------


@hookspec
def offload_delegate_providers() -> list[DelegateProvider]:
    """Return the command-line flags this plugin adds to every offload tool.

    Like LiteRT's delegate providers (``--use_gpu``, ``--gpu_precision_loss_allowed``): one
    flag switches the delegate on, the others set its options.

    :return: a list of :class:`offload.DelegateProvider`.
    """


@hookspec
def offload_add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add sub-commands to the ``offload`` command line (e.g. ``offload export-coreml``).

    A command sets ``func`` with ``parser.set_defaults(func=...)``; ``func(args)`` returns the
    process exit code.

    :param subparsers: the ``offload`` parser's sub-command collection.
    """

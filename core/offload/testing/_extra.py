"""Cases a delegate package ships with itself, found through the entry-point group
``offload.conformance_cases``.

A package declares, under its delegate's name::

    [project.entry-points."offload.conformance_cases"]
    my_delegate = "my_package.kit:CASES"

The object named is a sequence of :class:`~offload.testing.OpCase` or a function taking no
argument that returns one. ``python -m offload.testing my_delegate`` runs them after the
kit's own cases, and :func:`delegate_cases` gives them to ``run_conformance``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable, Sequence

from offload.errors import PluginError
from offload.testing._cases import OpCase

__all__ = ["CASES_ENTRY_POINT_GROUP", "delegate_cases", "load_cases"]

CASES_ENTRY_POINT_GROUP = "offload.conformance_cases"


def _checked(found: object, origin: str) -> tuple[OpCase, ...]:
    """``found`` (a sequence of OpCase, or a function returning one) as a tuple, or
    PluginError naming ``origin`` and what was found instead."""
    if callable(found) and not isinstance(found, OpCase):
        make: Callable[[], object] = found
        found = make()
    if not isinstance(found, Sequence) or isinstance(found, (str, bytes)):
        raise PluginError(
            f"conformance cases from {origin}: expected a sequence of OpCase (or a function "
            f"returning one), found {type(found).__name__}"
        )
    wrong = [type(c).__name__ for c in found if not isinstance(c, OpCase)]
    if wrong:
        raise PluginError(
            f"conformance cases from {origin}: expected only OpCase items, found {wrong[0]}"
        )
    return tuple(found)


def load_cases(spec: str) -> tuple[OpCase, ...]:
    """The cases named by ``"module:attribute"`` (a sequence, or a function returning one)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise PluginError(f"expected cases as MODULE:ATTRIBUTE, found {spec!r}")
    try:
        found = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise PluginError(f"cannot load conformance cases {spec!r}: {exc}") from exc
    return _checked(found, spec)


def delegate_cases(delegate: str) -> tuple[OpCase, ...]:
    """The cases installed packages register for ``delegate`` (by its name) in the
    ``offload.conformance_cases`` entry-point group, in entry-point order; none when no
    package registers any."""
    cases: list[OpCase] = []
    for ep in importlib.metadata.entry_points(group=CASES_ENTRY_POINT_GROUP):
        if ep.name != delegate:
            continue
        try:
            found = ep.load()
        except Exception as exc:  # a broken package is named, with its own error
            raise PluginError(
                f"cannot load conformance cases {ep.value!r} registered for {delegate!r}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        cases += _checked(found, f"entry point {ep.name} = {ep.value}")
    return tuple(cases)

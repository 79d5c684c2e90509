"""The one way offload retires a public form: it keeps working, and says what replaces it.

An old form (a parameter name, a declaration spelling, a function) keeps working for at least
one minor version after the release that deprecates it. Meanwhile each use raises a
``DeprecationWarning`` that names the old form, the new form and the version that removes the
old one. Every deprecation is registered in :data:`DEPRECATIONS` (where a test checks that none
outlives its removal version) and listed in CHANGELOG.md under "Deprecated".
"""

from __future__ import annotations

import functools
import inspect
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "DEPRECATED_ATTRIBUTES",
    "DEPRECATIONS",
    "Deprecation",
    "deprecated_attributes",
    "deprecation",
    "renamed_parameter",
    "warn_deprecated",
    "caller_stacklevel",
    "overrides",
]

F = TypeVar("F", bound=Callable[..., Any])

# Frames in these directories are offload's (or pydantic's, which validates declarations for
# it): a warning points past them at the user's line, wherever in the stack that is.
_CORE_DIR = str(Path(__file__).resolve().parent)
_SKIP_MODULES = ("pydantic", "pydantic_core", "importlib", "pluggy")


@dataclass(frozen=True)
class Deprecation:
    """One deprecated form: what it was, what replaces it, since when and until when.

    ``since`` is the first release that warns; ``removal`` the release that drops the old
    form (at least one minor version later).
    """

    key: str
    old: str
    new: str
    since: str
    removal: str

    def message(self, detail: str = "") -> str:
        text = (
            f"{self.old} is deprecated since offload {self.since} and will be removed in "
            f"offload {self.removal}; use {self.new} instead"
        )
        return f"{text} ({detail})" if detail else text


DEPRECATIONS: dict[str, Deprecation] = {}


def deprecation(key: str, *, old: str, new: str, since: str, removal: str) -> Deprecation:
    """Register a deprecation once, at import time, and return it for :func:`warn_deprecated`."""
    if key in DEPRECATIONS:
        raise ValueError(f"deprecation {key!r} is registered twice")
    if _version_tuple(removal) <= _version_tuple(since):
        raise ValueError(
            f"deprecation {key!r}: expected the removal version after {since}, found {removal}"
        )
    entry = Deprecation(key, old, new, since, removal)
    DEPRECATIONS[key] = entry
    return entry


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def caller_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning name the first frame outside offload's core.

    A declaration is validated several frames deep (pydantic, the plugin loader); counting
    those frames by hand would break whenever either changes.
    """
    frame = sys._getframe(1)
    level = 1
    while frame is not None:
        path = frame.f_code.co_filename
        module = frame.f_globals.get("__name__", "")
        ours = path.startswith(_CORE_DIR) or module.split(".")[0] in _SKIP_MODULES
        if not ours and not path.startswith("<frozen"):
            return level
        frame = frame.f_back  # type: ignore[assignment]  # None ends the loop
        level += 1
    return level


def warn_deprecated(entry: Deprecation, detail: str = "", stacklevel: int | None = None) -> None:
    """Warn about one use of ``entry``, pointing at the caller outside offload."""
    level = caller_stacklevel() if stacklevel is None else stacklevel + 1
    warnings.warn(entry.message(detail), DeprecationWarning, stacklevel=level)


# Module name -> {old attribute name: its deprecation}: the names a public module still gives,
# with a warning, after they left its ``__all__`` (the API snapshot lists them as deprecated).
DEPRECATED_ATTRIBUTES: dict[str, dict[str, Deprecation]] = {}


def deprecated_attributes(
    module: str, aliases: dict[str, tuple[Deprecation, Callable[[], Any]]]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` that still gives each old name in ``aliases``, with a warning.

    ``aliases`` maps an old name to its deprecation and a function returning its value (read
    when asked, so the value is the module's current one)::

        __getattr__ = deprecated_attributes(__name__, {"OLD": (_OLD, lambda: _NEW)})
    """
    DEPRECATED_ATTRIBUTES.setdefault(module, {}).update(
        {name: entry for name, (entry, _) in aliases.items()}
    )

    def __getattr__(name: str) -> Any:
        if name in aliases:
            entry, value = aliases[name]
            # ``from package import name`` asks twice: importlib's hasattr() probe, then the
            # import itself. Warn once, for the import.
            if sys._getframe(1).f_globals.get("__name__") != "importlib._bootstrap":
                warn_deprecated(entry)
            return value()
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


def overrides(cls: type, base: type, name: str) -> bool:
    """Whether ``cls`` (a subclass of ``base``) defines ``name`` anew, itself or in between."""
    missing = object()
    found = inspect.getattr_static(cls, name, missing)
    return found is not missing and found is not inspect.getattr_static(base, name, missing)


def renamed_parameter(entry: Deprecation, old: str, new: str) -> Callable[[F], F]:
    """Let callers still pass keyword ``old`` to a function whose parameter is now ``new``.

    The wrapped function keeps its new signature (``inspect.signature`` reads it), so that the
    public-API snapshot and the LiteRT parity check see only the new name.
    """

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if old in kwargs:
                if new in kwargs:
                    raise TypeError(
                        f"{func.__name__}() got both {new!r} and its deprecated name {old!r}; "
                        f"pass {new!r} only"
                    )
                warn_deprecated(entry)
                kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]  # same call signature, by functools.wraps

    return decorate

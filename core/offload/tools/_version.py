"""``offload --version``: offload's version, and each installed plugin's with the range of
offload it declares (its ``offload>=X,<Y`` requirement) and whether this offload is in it."""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
from collections.abc import Sequence
from typing import Any

from offload._plugins import list_plugins
from offload.tools._common import format_table

__all__ = ["VersionAction", "offload_requirement", "version_report"]

# "offload", then optional extras, then the specifier up to an environment marker.
_REQUIREMENT = re.compile(r"^offload(?![\w.-])\s*(?:\[[^\]]*\])?\s*\(?([^;)]*)\)?")


def offload_requirement(distribution: str) -> str | None:
    """The offload version range ``distribution`` declares (``">=0.1,<0.2"``), ``""`` when it
    requires offload without a range, None when it does not require offload (or is not
    installed)."""
    try:
        requires = importlib.metadata.requires(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for requirement in requires:
        match = _REQUIREMENT.match(requirement.strip())
        if match:
            return match.group(1).replace(" ", "")
    return None


def _in_range(version: str, specifier: str) -> bool | None:
    """Whether ``version`` satisfies ``specifier``; None where ``packaging`` (not a
    dependency of offload) is not installed to tell."""
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import InvalidVersion, Version
    except ImportError:
        return None
    try:
        return Version(version) in SpecifierSet(specifier, prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return None


def version_report() -> str:
    from offload import __version__

    lines = [f"offload {__version__} (Python {sys.version.split()[0]})"]
    records = list_plugins()
    if not records:
        return "\n".join([*lines, "no plugins installed"])
    rows = []
    for record in records:
        wanted = offload_requirement(record.distribution)
        if wanted is None:
            declared = "-"
        elif not wanted:
            declared = "offload (any version)"
        else:
            declared = f"offload{wanted}"
            if _in_range(__version__, wanted) is False:
                declared += f" (not {__version__}!)"
        rows.append([record.name, record.distribution, record.version, declared, record.status])
    lines.append("plugins:")
    lines.append(
        format_table(["plugin", "distribution", "version", "supports", "status"], rows, "  ")
    )
    return "\n".join(lines)


class VersionAction(argparse.Action):
    """``--version``: print :func:`version_report` and exit 0, as argparse's own action does."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.setdefault("help", "show offload's version and the installed plugins', and exit")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(version_report())
        parser.exit()

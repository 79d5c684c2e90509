"""Configurations as text names them: ``cpu``, ``auto``, ``default``, or delegates with their
options in priority order (``openvino:num_threads=1+litert``).

:func:`offload.sweep` takes its configurations this way, and the command line's ``--config``
and ``--reference`` flags pass theirs through unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from offload._delegate import Delegate
from offload._plugins import load_delegate
from offload.errors import UsageError

__all__ = ["CPU_CHOICE", "ConfigSpec", "parse_config_spec"]

# ``cpu``: the CPU reference alone (as ``--delegate cpu`` and ``--compare cpu``), not a
# delegate's name.
CPU_CHOICE = "cpu"


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

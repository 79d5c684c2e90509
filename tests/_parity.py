"""The parity check shared by the LiteRT API tests: every public member of a LiteRT module
or class, read by introspection, exists in offload's with LiteRT's parameter names, defaults
and keyword-ness, unless offload's DIFFERENCES documents the difference."""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


def public_members(cls: type) -> dict[str, Any]:
    """Public names of ``cls`` (its bases included), plus the constructor and ``__call__``
    where the class defines them, as raw attributes (properties stay properties)."""
    members: dict[str, Any] = {}
    for klass in reversed(cls.__mro__[:-1]):  # object's members are nobody's API
        for name, value in vars(klass).items():
            if not name.startswith("_") or name in ("__init__", "__call__"):
                # A classmethod's or staticmethod's signature is its function's.
                if isinstance(value, (classmethod, staticmethod)):
                    value = value.__func__
                members[name] = value
    return members


def _same_default(theirs: Any, mine: Any) -> bool:
    if isinstance(theirs, enum.Enum) and isinstance(mine, enum.Enum):
        return (theirs.name, theirs.value) == (mine.name, mine.value)
    return type(theirs) is type(mine) and theirs == mine


def _describe(value: Any) -> str:
    try:
        return str(inspect.signature(value))
    except (TypeError, ValueError):
        return f" ({type(value).__name__})"


@dataclass
class Parity:
    """The check for one offload module: its DIFFERENCES, the LiteRT keywords a constructor
    takes through ``**kwargs`` (with LiteRT's defaults), and the leading positional parameters
    that must stay where LiteRT has them."""

    differences: Mapping[str, str]
    module: str
    absorbed: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    positional_prefix: Mapping[str, int] = field(default_factory=dict)

    def signature_problems(
        self, where: str, theirs: Callable[..., Any], mine: Callable[..., Any]
    ) -> list:
        """Why a LiteRT call of ``theirs`` would not bind to ``mine`` the same way ([] if it
        would)."""
        theirs_sig, mine_sig = inspect.signature(theirs), inspect.signature(mine)
        t_params = [p for n, p in theirs_sig.parameters.items() if n != "self"]
        m_params = [p for n, p in mine_sig.parameters.items() if n != "self"]
        m_by_name = {p.name: p for p in m_params}
        m_kinds = {p.kind for p in m_params}
        t_positional = [p.name for p in t_params if p.kind is p.POSITIONAL_OR_KEYWORD]
        m_positional = [p.name for p in m_params if p.kind is p.POSITIONAL_OR_KEYWORD]
        problems = []
        documented_positions = f"{where}(positional arguments)" in self.differences
        prefix = self.positional_prefix.get(where, len(t_positional))
        if m_positional[:prefix] != t_positional[:prefix]:
            problems.append(
                f"{where}: positional parameters {m_positional[:prefix]}, LiteRT has "
                f"{t_positional[:prefix]}"
            )
        for pos, p in enumerate(t_params):
            if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                if p.kind not in m_kinds:
                    problems.append(f"{where}: LiteRT takes {p}, offload does not")
                continue
            mp = m_by_name.get(p.name)
            if mp is None:
                absorbed = self.absorbed.get(where, {})
                if p.VAR_KEYWORD not in m_kinds or p.name not in absorbed:
                    problems.append(f"{where}: parameter {p.name!r} is missing (LiteRT: {p})")
                elif not _same_default(p.default, absorbed[p.name]):
                    problems.append(
                        f"{where}: {p.name} defaults to {absorbed[p.name]!r}, LiteRT's to "
                        f"{p.default!r}"
                    )
                elif not documented_positions and p.kind is p.POSITIONAL_OR_KEYWORD:
                    problems.append(f"{where}: {p.name} is keyword-only, LiteRT's is positional")
                continue
            if p.default is not p.empty and not _same_default(p.default, mp.default):
                problems.append(
                    f"{where}: {p.name} defaults to {mp.default!r}, LiteRT's to {p.default!r}"
                )
            if p.default is p.empty and mp.default is not mp.empty:
                problems.append(f"{where}: {p.name} is optional in offload, required in LiteRT")
            same_place = p.name not in t_positional or (
                p.name in m_positional and m_positional.index(p.name) == t_positional.index(p.name)
            )
            if (mp.kind is not p.kind or not same_place) and not documented_positions:
                problems.append(
                    f"{where}: {p.name} is {mp.kind.description} at position "
                    f"{m_params.index(mp)}, LiteRT's is {p.kind.description} at position {pos}"
                )
        for mp in m_params:  # offload's own parameters must not make a LiteRT call fail
            if mp.name not in {p.name for p in t_params} and mp.kind not in (
                mp.VAR_KEYWORD,
                mp.VAR_POSITIONAL,
            ):
                if mp.default is mp.empty:
                    problems.append(f"{where}: offload requires {mp.name!r}, which LiteRT has not")
        return problems

    def class_problems(self, name: str, theirs: type, mine: type) -> list[str]:
        """Members of LiteRT's class ``theirs`` that ``mine`` lacks or takes differently."""
        problems = []
        mine_members = public_members(mine)
        for member, value in sorted(public_members(theirs).items()):
            where = f"{name}.{member}"
            if member not in mine_members:
                problems.append(f"{where} is missing (LiteRT has {member}{_describe(value)})")
                continue
            found = mine_members[member]
            if isinstance(value, property) != isinstance(found, property):
                kind = "a property" if isinstance(value, property) else "a method"
                problems.append(f"{where}: LiteRT's is {kind}, offload's is not")
            elif callable(value):
                problems += self.signature_problems(where, value, found)
        return problems

    def module_problems(self, theirs: Any, mine: Any) -> list[str]:
        """Every public name of LiteRT's module, checked in offload's (typing's names that
        LiteRT's module imports for its annotations are not its API)."""
        problems = []
        names = [
            n
            for n in dir(theirs)
            if not n.startswith("_") and getattr(getattr(theirs, n), "__module__", "") != "typing"
        ]
        for name in sorted(n for n in names if not inspect.ismodule(getattr(theirs, n))):
            value = getattr(theirs, name)
            if not hasattr(mine, name):
                problems.append(f"{self.module}.{name} is missing")
            elif name in self.differences:
                continue  # documented: exists, behaves as the entry says
            elif isinstance(value, type) and issubclass(value, enum.Enum):
                want = {m.name: m.value for m in value}
                found = {m.name: m.value for m in getattr(mine, name)}
                if want != found:
                    problems.append(f"{name}: members {found}, LiteRT's {want}")
            elif isinstance(value, type):
                problems += self.class_problems(name, value, getattr(mine, name))
            elif callable(value):
                problems += self.signature_problems(name, value, getattr(mine, name))
        return problems

"""Command-line flags that plugins contribute, after LiteRT's delegate providers."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["DelegateFlag", "DelegateProvider", "add_provider_flags", "delegates_from_args"]


class DelegateFlag(BaseModel):
    """One ``--flag`` that sets one delegate option."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    flag: str
    option: str
    type: Literal["bool", "int", "float", "str"] = "str"
    help: str = ""


class DelegateProvider(BaseModel):
    """A delegate's flags: ``enable_flag`` switches it on, ``flags`` set its options."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    delegate: str
    enable_flag: str
    help: str = ""
    flags: tuple[DelegateFlag, ...] = ()


_TYPES: dict[str, Any] = {"int": int, "float": float, "str": str}


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, found {text!r}")


def add_provider_flags(
    parser: argparse.ArgumentParser, providers: Sequence[DelegateProvider]
) -> None:
    """Add every provider's flags, plus LiteRT's external-delegate flags, to ``parser``."""
    group = parser.add_argument_group("delegates")
    for provider in providers:
        group.add_argument(
            provider.enable_flag,
            dest=_dest(provider.enable_flag),
            type=_parse_bool,
            nargs="?",
            const=True,
            default=False,
            help=provider.help or f"run supported nodes on the {provider.delegate} delegate",
        )
        for flag in provider.flags:
            kind = _parse_bool if flag.type == "bool" else _TYPES[flag.type]
            group.add_argument(
                flag.flag,
                dest=_dest(flag.flag),
                type=kind,
                default=None,
                help=flag.help or f"{provider.delegate} option {flag.option}",
            )
    group.add_argument(
        "--external_delegate_path",
        default=None,
        help="a delegate module (path/to/file.py or package.module) to load",
    )
    group.add_argument(
        "--external_delegate_options",
        default="",
        help="options for the external delegate, 'k1:v1;k2:v2'",
    )


def parse_external_options(text: str) -> dict[str, Any]:
    """LiteRT's 'k1:v1;k2:v2' syntax, with values read as JSON scalars where they parse."""
    import json

    options: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in text.split(";"))):
        key, sep, value = item.partition(":")
        if not sep:
            raise ValueError(f"expected 'key:value' in --external_delegate_options, found {item!r}")
        try:
            options[key.strip()] = json.loads(value.strip())
        except json.JSONDecodeError:
            options[key.strip()] = value.strip()
    return options


def delegates_from_args(
    args: argparse.Namespace, providers: Sequence[DelegateProvider]
) -> list[tuple[str, dict[str, Any]]]:
    """The (delegate name or path, options) pairs the parsed flags ask for, in flag order."""
    chosen: list[tuple[str, dict[str, Any]]] = []
    for provider in providers:
        if not getattr(args, _dest(provider.enable_flag), False):
            continue
        options = {
            f.option: getattr(args, _dest(f.flag))
            for f in provider.flags
            if getattr(args, _dest(f.flag), None) is not None
        }
        chosen.append((provider.delegate, options))
    path = getattr(args, "external_delegate_path", None)
    if path:
        chosen.append(
            (path, parse_external_options(getattr(args, "external_delegate_options", "")))
        )
    return chosen

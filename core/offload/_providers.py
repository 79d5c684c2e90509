"""Command-line flags that plugins contribute, after LiteRT's delegate providers.

A provider's ``enable_flag`` (``--use_gpu``) selects its delegate; its option flags
(``--gpu_precision_loss_allowed true``) set that delegate's options, whether the delegate was
selected by the enable flag or by ``--delegate NAME``. A value is checked against the
delegate's pydantic Options when the command line is parsed, so a bad one is a usage error
naming the flag; an option flag for a delegate that is not selected is an error naming the flag
that selects it.
"""

from __future__ import annotations

import argparse
import typing
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ValidationError, field_validator, model_validator

from offload._capabilities import _Frozen
from offload._delegate import DelegateOptions

__all__ = [
    "DelegateFlag",
    "DelegateProvider",
    "add_provider_flags",
    "delegates_from_args",
    "parse_external_options",
]

_TYPES: dict[str, Any] = {"int": int, "float": float, "str": str}
# Flags every tool has, which no plugin may take.
RESERVED_FLAGS = frozenset(
    {"--delegate", "--json", "--external_delegate_path", "--external_delegate_options"}
)


class _Declared(_Frozen):
    """Built inside a plugin's hook and checked as a capability declaration is.

    A subclass rather than the same name: it is recorded as DelegateFlag's and
    DelegateProvider's base in the public surface (tests/public_api.json).
    """


def _flag_name(flag: str) -> str:
    body = flag[2:]
    if not (flag.startswith("--") and body[:1].isalpha() and body.replace("-", "_").isidentifier()):
        raise ValueError(f"expected a long flag like '--use_gpu', found {flag!r}")
    if flag in RESERVED_FLAGS:
        raise ValueError(f"{flag} is offload's own flag; choose another name")
    return flag


class DelegateFlag(_Declared):
    """One ``--flag`` that sets one delegate option (a field of the delegate's Options).

    ``type`` converts the text before the Options model checks it.
    """

    flag: str
    option: str
    type: Literal["bool", "int", "float", "str"] = "str"
    help: str = ""

    _check_flag = field_validator("flag")(_flag_name)


class DelegateProvider(_Declared):
    """A delegate's flags: ``enable_flag`` switches it on, ``flags`` set its options.

    ``flag_prefix`` (``"--gpu_"``): every option :class:`~offload.DelegateOptions` gives all
    delegates (``max_delegated_partitions``, ``min_nodes_per_partition``) gets a flag of that
    prefix and the field's name, type and description, unless ``flags`` sets the option
    already; they are in ``flags`` after the ones declared.
    """

    delegate: str
    enable_flag: str
    help: str = ""
    flags: tuple[DelegateFlag, ...] = ()
    flag_prefix: str | None = None

    _check_enable = field_validator("enable_flag")(_flag_name)

    @model_validator(mode="before")
    @classmethod
    def _common_flags(cls, data: Any) -> Any:
        prefix = data.get("flag_prefix") if isinstance(data, Mapping) else None
        if not isinstance(prefix, str):
            return data
        _flag_name(prefix + "x")  # a prefix a flag can start with
        declared = list(data.get("flags") or ())
        taken = {
            f.option if isinstance(f, DelegateFlag) else dict(f).get("option") for f in declared
        }
        derived = [
            DelegateFlag(
                flag=prefix + name,
                option=name,
                type=_flag_type(field.annotation),
                help=field.description or "",
            )
            for name, field in DelegateOptions.model_fields.items()
            if name not in taken
        ]
        return {**data, "flags": (*declared, *derived)}

    @model_validator(mode="after")
    def _distinct(self) -> DelegateProvider:
        names = [self.enable_flag, *(f.flag for f in self.flags)]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"flags: expected distinct flags, found {repeated} more than once")
        return self


def _flag_type(annotation: Any) -> Literal["bool", "int", "float", "str"]:
    """The flag type that converts text to an option of this annotation (None aside)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    base = typing.get_origin(args[0]) or args[0]
    if typing.get_origin(args[0]) is typing.Annotated:
        base = typing.get_args(args[0])[0]
    for python_type, name in _FLAG_TYPES:
        if isinstance(base, type) and issubclass(base, python_type):
            return name
    return "str"


# bool before int: a bool is an int to issubclass.
_FLAG_TYPES: tuple[tuple[type, Literal["bool", "int", "float"]], ...] = (
    (bool, "bool"),
    (int, "int"),
    (float, "float"),
)


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, found {text!r}")


def _literal_choices(model: type[BaseModel], option: str) -> list[Any] | None:
    """The allowed values of a Literal (or optional Literal) option, for argparse's help."""
    annotation = model.model_fields[option].annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is Literal:
        return list(typing.get_args(annotation))
    if len(args) == 1 and typing.get_origin(args[0]) is Literal:
        return list(typing.get_args(args[0]))
    return None


def _converter(
    flag: DelegateFlag, delegate: str, model: type[BaseModel] | None
) -> Callable[[str], Any]:
    base = _parse_bool if flag.type == "bool" else _TYPES[flag.type]

    def convert(text: str) -> Any:
        try:
            value = base(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'a number' if flag.type != 'int' else 'an integer'}, found {text!r}"
            ) from None
        if model is None or flag.option not in model.model_fields:
            return value
        try:
            model.model_validate({flag.option: value})
        except ValidationError as exc:
            # Only this option's errors: others come from the rest of the (default) options.
            mine = [e for e in exc.errors() if e["loc"][:1] == (flag.option,)]
            if mine:
                choices = _literal_choices(model, flag.option)
                msg = str(mine[0]["msg"]).removeprefix("Input should be ")
                expected = f"one of {choices}" if choices else msg
                raise argparse.ArgumentTypeError(
                    f"{delegate} option {flag.option}: expected {expected}, found {text!r}"
                ) from None
        return value

    return convert


def add_provider_flags(
    parser: argparse.ArgumentParser,
    providers: Sequence[DelegateProvider],
    options: Mapping[str, type[BaseModel]] | None = None,
) -> None:
    """Add every provider's flags, plus LiteRT's external-delegate flags, to ``parser``.

    ``options`` maps a delegate name to its Options model; the values of that delegate's flags
    are checked against it as they are parsed.
    """
    group = parser.add_argument_group("delegates")
    for provider in providers:
        model = (options or {}).get(provider.delegate)
        try:
            group.add_argument(
                provider.enable_flag,
                dest=_dest(provider.enable_flag),
                type=_parse_bool,
                nargs="?",
                const=True,
                default=False,
                help=provider.help or f"run supported nodes on the {provider.delegate} delegate",
            )
        except argparse.ArgumentError as exc:  # a flag this tool has already: keep the tool's
            warnings.warn(
                f"delegate {provider.delegate!r}: {exc}; skipping its flags", stacklevel=2
            )
            continue
        for flag in provider.flags:
            known = model is not None and flag.option in model.model_fields
            choices = _literal_choices(model, flag.option) if model and known else None
            hint = f" (needs {provider.enable_flag} or --delegate {provider.delegate})"
            try:
                group.add_argument(
                    flag.flag,
                    dest=_dest(flag.flag),
                    type=_converter(flag, provider.delegate, model),
                    choices=choices,
                    default=None,
                    help=(flag.help or f"{provider.delegate} option {flag.option}") + hint,
                )
            except argparse.ArgumentError as exc:
                warnings.warn(f"delegate {provider.delegate!r}: {exc}", stacklevel=2)
    group.add_argument(
        "--external_delegate_path",
        default=None,
        help="a delegate module (path/to/file.py or package.module) to load, or a LiteRT C "
        "delegate library (x.so), which the litert delegate (offload-litert) has LiteRT apply",
    )
    group.add_argument(
        "--external_delegate_options",
        default="",
        help="options for the external delegate (a C library's own), 'k1:v1;k2:v2'",
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
    args: argparse.Namespace,
    providers: Sequence[DelegateProvider],
    selected: Collection[str] = (),
) -> list[tuple[str, dict[str, Any]]]:
    """The (delegate name or path, options) pairs the parsed flags ask for, in flag order.

    ``selected`` are the names given with ``--delegate``: their option flags apply too. An
    option flag for a delegate selected neither way raises ValueError naming the flag that
    would select it.
    """
    chosen: list[tuple[str, dict[str, Any]]] = []
    for provider in providers:
        given = [f for f in provider.flags if getattr(args, _dest(f.flag), None) is not None]
        enabled = bool(getattr(args, _dest(provider.enable_flag), False))
        if not enabled and provider.delegate not in selected:
            if given:
                flag, d = given[0].flag, provider.delegate
                why = (
                    "--delegate auto plans every delegate with its default options"
                    if "auto" in selected
                    else "that delegate is not selected"
                )
                raise ValueError(
                    f"{flag} sets an option of delegate {d!r}, but {why}; select it with "
                    f"{provider.enable_flag} or --delegate {d}"
                )
            continue
        options = {f.option: getattr(args, _dest(f.flag)) for f in given}
        if enabled or options:
            chosen.append((provider.delegate, options))
    path = getattr(args, "external_delegate_path", None)
    if path:
        chosen.append(
            (path, parse_external_options(getattr(args, "external_delegate_options", "")))
        )
    return chosen

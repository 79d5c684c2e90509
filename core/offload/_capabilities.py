"""What a delegate declares it can run, as validated data.

Capabilities are pydantic models so that a malformed declaration fails where it is written,
with the op and the field named (:class:`~offload.errors.CapabilityDeclarationError`), and so
that the capability matrix, ``offload delegates`` and the partitioner all read the same facts.
Every field, its matching rule and an example are in docs/delegate-authors.md.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Literal, get_args

import numpy as np
import tflite
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    ValidationError,
    field_validator,
    model_validator,
)
from tflite.utils import BUILTIN_OPCODE2NAME

from offload._deprecation import deprecation, warn_deprecated
from offload._graph import MODEL_TYPES, ModelType, Node, Subgraph, Tensor
from offload._schema import OptionField, enum_values, option_field_map, options_type_for
from offload.errors import CapabilityDeclarationError

__all__ = [
    "OpCapability",
    "ModelTypeSupport",
    "Capabilities",
    "check_node",
    "DTYPE_NAMES",
    "DTypeName",
    "HARDWARE_KINDS",
    "HardwareKind",
    "FUSED_ACTIVATION_NAMES",
    "describe_validation_error",
]

HardwareKind = Literal["cpu", "gpu", "npu"]
HARDWARE_KINDS: tuple[HardwareKind, ...] = ("cpu", "gpu", "npu")
# The dtype names a declaration uses (numpy's, "bool" for np.bool_).
DTypeName = Literal[
    "float32", "float16", "int8", "uint8", "int16", "int32", "int64", "bool", "complex64", "string"
]
# Those of numeric and boolean tensors: every DTypeName but TFLite's strings.
DTYPE_NAMES: tuple[DTypeName, ...] = tuple(n for n in get_args(DTypeName) if n != "string")
_BUILTIN_NAMES = set(BUILTIN_OPCODE2NAME.values())
# TFLite's ActivationFunctionType names, the only values a node's fused activation can have.
FUSED_ACTIVATION_NAMES = tuple(enum_values(tflite.ActivationFunctionType))
_COLLECTIONS = (tuple, list, set, frozenset)
# offload 0.1.0 read most enum options (weights_format among them) as the schema's numbers,
# as LiteRT's C++ API and the tflite package spell them, so declarations written for it say
# {"weights_format": 0}; every enum option is read by name since.
_ENUM_NUMBERS = deprecation(
    "capability-enum-numbers",
    old="an enum option declared by its number (options={'weights_format': 0})",
    new="its name (options={'weights_format': 'DEFAULT'})",
    since="0.2.0",
    removal="0.3.0",
)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, /, **data: Any) -> None:
        # A plugin builds these at import time or in a hook: turn pydantic's report into one
        # typed error naming the op and the field, instead of raw validation text.
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise CapabilityDeclarationError(
                describe_validation_error(exc, data, type(self).__name__)
            ) from None


def describe_validation_error(exc: ValidationError, data: Any, what: str) -> str:
    """One line per problem, each naming the op (where there is one) and the field."""
    problems = []
    for err in exc.errors():
        cause = err.get("ctx", {}).get("error")
        if isinstance(cause, CapabilityDeclarationError):  # a nested OpCapability, already named
            problems.append(str(cause))
            continue
        loc = list(err["loc"])
        subject = what
        if what == "OpCapability" and isinstance(data, Mapping) and "op" in data:
            subject = f"OpCapability {data['op']!r}"
        elif len(loc) >= 2 and loc[0] == "ops" and isinstance(loc[1], int):
            subject = f"capability of op {_op_at(data, loc[1])}"
            loc = loc[2:]
        # Errors of a whole-object check have no location; their text starts with the field.
        field = "".join(f"{p}: " for p in [".".join(str(p) for p in loc)] if p)
        msg = str(err["msg"]).removeprefix("Value error, ")
        found = "" if err["type"].startswith("value_error") else f", found {err['input']!r}"
        problems.append(f"{subject}: {field}{msg}{found}")
    return "; ".join(problems)


def _op_at(data: Any, index: int) -> str:
    ops = data.get("ops") if isinstance(data, Mapping) else getattr(data, "ops", None)
    try:
        item = ops[index]  # type: ignore[index]
    except (TypeError, IndexError, KeyError):
        return f"#{index}"
    op = item.get("op") if isinstance(item, Mapping) else getattr(item, "op", None)
    return repr(op) if op is not None else f"#{index}"


@functools.cache
def _option_fields(op: str) -> dict[str, OptionField]:
    """The node-options fields ``op`` has, by the names ``node.options`` uses."""
    type_name = options_type_for(op)
    if type_name is None or not hasattr(tflite, type_name):
        return {}
    return {n: f for n, f in option_field_map(type_name).items() if f.kind != "table"}


def _allowed(want: Any) -> tuple[Any, ...]:
    return want if isinstance(want, tuple) else (want,)


def _matches(found: Any, want: Any) -> bool:
    # The schema stores float options as float32: compare at that precision, so that a
    # declared 0.1 matches the 0.1 a converter wrote.
    if isinstance(found, float) and isinstance(want, (int, float)) and not isinstance(want, bool):
        return bool(np.float32(found) == np.float32(want))
    return bool(found == want)


def _one_of(allowed: tuple[Any, ...]) -> str:
    if len(allowed) == 1:
        return repr(allowed[0])
    return f"one of {list(allowed)}"


class OpCapability(_Frozen):
    """One op a delegate runs, with the limits it cannot go past.

    Every limit here is checked by the core, which turns a failed check into a named reason
    (``"max_rank: input 0 has rank 5, at most 4 supported"``). Limits that data cannot express
    go in ``constraints`` as text and are enforced by the delegate's ``check_node``.

    ``op``: the builtin op name (``"CONV_2D"``). ``versions``: the inclusive range of op
    versions taken. ``dtypes``: the dtypes of the tensors the delegate reads at run time (every
    input that is not a constant; constants are the delegate's to transform at init) and, unless
    ``output_dtypes`` is given, of every output it writes. ``max_rank``: the highest rank of a
    runtime input. ``fused_activations``: the fused activations taken (None: any).
    ``constant_inputs``: input positions that must be constants; ``constant_dtypes``, when
    given, the dtypes those constants may have (None: any). ``max_inputs``: the most
    present inputs. ``broadcast``: False requires the runtime inputs to have one shape.
    ``options``: node-options field -> the allowed value, or a tuple/list/set of allowed values
    (for a vector field, a list of allowed tuples). ``constraints``: the rest, as text.
    """

    op: str
    versions: tuple[int, int] = (1, 1)
    dtypes: tuple[DTypeName, ...] = ("float32",)
    output_dtypes: tuple[DTypeName, ...] | None = None
    max_rank: NonNegativeInt | None = None
    fused_activations: tuple[str, ...] | None = None
    constant_inputs: tuple[NonNegativeInt, ...] = ()
    constant_dtypes: tuple[DTypeName, ...] | None = None
    max_inputs: NonNegativeInt | None = None
    broadcast: bool = True
    options: dict[str, Any] = Field(default_factory=dict)
    constraints: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _enum_numbers_to_names(cls, data: Any) -> Any:
        """Map enum options declared by number to their names, with one DeprecationWarning."""
        if not isinstance(data, Mapping) or not isinstance(data.get("options"), Mapping):
            return data
        op = data.get("op")
        fields = _option_fields(op) if isinstance(op, str) and op in _BUILTIN_NAMES else {}
        mapped: list[str] = []
        options: dict[str, Any] = {}
        for key, want in data["options"].items():
            field = fields.get(key)
            if field is not None and field.enum is not None:
                want, changed = _numbers_to_names(want, _enum_names_of(field))
                if changed:
                    mapped.append(f"{key}: {changed}")
            options[key] = want
        if not mapped:
            return data
        warn_deprecated(_ENUM_NUMBERS, f"OpCapability {op!r}: " + "; ".join(mapped))
        return {**data, "options": options}

    @field_validator("op")
    @classmethod
    def _known_op(cls, op: str) -> str:
        if op not in _BUILTIN_NAMES:
            raise ValueError(f"expected a TFLite builtin op name such as 'CONV_2D', found {op!r}")
        return op

    @field_validator("versions")
    @classmethod
    def _version_range(cls, versions: tuple[int, int]) -> tuple[int, int]:
        lo, hi = versions
        if lo < 1 or hi < lo:
            raise ValueError(
                f"expected a version range (lo, hi) with 1 <= lo <= hi, found {versions}"
            )
        return versions

    @field_validator("dtypes")
    @classmethod
    def _some_dtype(cls, dtypes: tuple[str, ...]) -> tuple[str, ...]:
        if not dtypes:
            raise ValueError("expected at least one dtype, found none (the op could never run)")
        return dtypes

    @field_validator("fused_activations")
    @classmethod
    def _known_activations(cls, names: tuple[str, ...] | None) -> tuple[str, ...] | None:
        unknown = [n for n in names or () if n not in FUSED_ACTIVATION_NAMES]
        if unknown:
            raise ValueError(
                f"expected TFLite fused activation names among {list(FUSED_ACTIVATION_NAMES)}, "
                f"found {unknown}"
            )
        return names

    @field_validator("constant_inputs")
    @classmethod
    def _distinct_positions(cls, positions: tuple[int, ...]) -> tuple[int, ...]:
        if len(set(positions)) != len(positions):
            raise ValueError(f"expected distinct input positions, found {list(positions)}")
        return positions

    @field_validator("options")
    @classmethod
    def _normalise_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        # Lists and sets become tuples, so that one rule (a tuple lists allowed values) matches,
        # and a set's order (hash-dependent) does not leak into messages.
        normalised: dict[str, Any] = {}
        for key, want in options.items():
            if isinstance(want, _COLLECTIONS):
                items = list(want)
                if isinstance(want, (set, frozenset)):
                    try:
                        items = sorted(items)
                    except TypeError:
                        pass
                if not items:
                    raise ValueError(f"{key}: expected at least one allowed value, found none")
                want = tuple(tuple(v) if isinstance(v, list) else v for v in items)
            normalised[key] = want
        return normalised

    @model_validator(mode="after")
    def _consistent(self) -> OpCapability:
        if self.constant_dtypes is not None and not self.constant_dtypes:
            raise ValueError("constant_dtypes: expected at least one dtype or None, found ()")
        if self.constant_dtypes is not None and not self.constant_inputs:
            raise ValueError(
                "constant_dtypes: expected constant_inputs to name the inputs it limits, "
                "found constant_inputs=()"
            )
        if self.max_inputs is not None:
            beyond = [p for p in self.constant_inputs if p >= self.max_inputs]
            if beyond:
                raise ValueError(
                    f"constant_inputs: positions {beyond} are beyond max_inputs="
                    f"{self.max_inputs} (positions count from 0)"
                )
        fields = _option_fields(self.op)
        if self.fused_activations is not None and "fused_activation_function" not in fields:
            raise ValueError(
                f"fused_activations: {self.op} has no fused activation "
                "(its options have no fused_activation_function field)"
            )
        for key, want in self.options.items():
            if key not in fields:
                have = sorted(fields) or "none"
                raise ValueError(f"options: {self.op} has no option {key!r} (its options: {have})")
            allowed = _allowed(want)
            if fields[key].kind == "vector" and not all(isinstance(v, tuple) for v in allowed):
                raise ValueError(
                    f"options: {key} is a vector field; declare its allowed values as a list "
                    f"of tuples, e.g. [(1, 2)], found {want!r}"
                )
            names = list(fields[key].choices)
            bad = [v for v in allowed if names and v not in names]
            if bad:
                raise ValueError(f"options: {key} takes {names}, found {bad}")
        return self


def _enum_names_of(field: OptionField) -> dict[int, str]:
    """``{number: name}`` of an enum option field (the first name of an aliased number)."""
    by_number: dict[int, str] = {}
    for name, number in field.choices.items():
        by_number.setdefault(number, name)
    return by_number


def _numbers_to_names(want: Any, names: dict[int, str]) -> tuple[Any, str]:
    """``want`` with known enum numbers replaced by names, and what was replaced (for the
    warning); a number the schema does not have stays, for the usual "takes [...]" error."""

    def one(value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool) and value in names:
            return names[value]
        return value

    if isinstance(want, _COLLECTIONS):
        items = [one(v) for v in want]
        new: Any = type(want)(items) if not isinstance(want, list) else items
        changed = [f"{v!r} -> {one(v)!r}" for v in want if one(v) != v]
    else:
        new = one(want)
        changed = [f"{want!r} -> {new!r}"] if new != want else []
    return new, ", ".join(changed)


class ModelTypeSupport(_Frozen):
    """Whether a delegate takes models of one type: "yes", "no" or "partial", and why."""

    support: Literal["yes", "no", "partial"]
    reason: str = ""


class Capabilities(_Frozen):
    """A delegate's declaration: ops, model types, platforms, precisions and cost hints."""

    ops: tuple[OpCapability, ...]
    model_types: dict[ModelType, ModelTypeSupport]
    platforms: tuple[str, ...] = ("any",)
    precisions: tuple[Literal["float32", "float16", "int8"], ...] = ("float32",)
    # The kind of hardware the delegate computes on, as LiteRT's HardwareAccelerator names
    # them: CompiledModel(hardware_accel=...) plans with the delegates of the kinds asked for.
    # "cpu" by default, so a delegate declared before this field existed keeps its place.
    hardware: HardwareKind = "cpu"
    # Cost hints for delegates="auto": how much faster than the CPU reference a delegated node
    # runs, and what one partition costs to enter and leave, in units of one CPU node.
    expected_speedup: float = Field(default=1.0, gt=0)
    partition_overhead: float = Field(default=5.0, ge=0)
    # Ops users ask about that this delegate does not declare, each with why: the planner
    # gives that reason ("op LSTM is not supported: <why>") instead of the bare one.
    unsupported_ops: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _complete(self) -> Capabilities:
        missing = [t for t in MODEL_TYPES if t not in self.model_types]
        if missing:
            raise ValueError(
                f"model_types must cover all of {list(MODEL_TYPES)}; missing {missing}"
            )
        seen: set[str] = set()
        for cap in self.ops:
            if cap.op in seen:
                raise ValueError(f"op {cap.op} is declared twice")
            seen.add(cap.op)
        both = sorted(seen & set(self.unsupported_ops))
        if both:
            raise ValueError(f"unsupported_ops names declared ops: {both}")
        return self

    def op(self, name: str) -> OpCapability | None:
        for cap in self.ops:
            if cap.op == name:
                return cap
        return None


def _dtype_name(t: Tensor) -> str:
    """The DTypeName a declaration uses for ``t``: numpy's name, and ``string`` for a
    TFLite STRING tensor (numpy holds it as ``object``, as it does resources)."""
    if t.type_name == "STRING":
        return "string"
    return "bool" if t.dtype == np.bool_ else str(t.dtype)


def check_node(cap: OpCapability | None, node: Node, subgraph: Subgraph) -> str | None:
    """None if ``node`` fits ``cap``, else the first reason it does not."""
    if node.is_custom:
        return f"custom op {node.custom_code!r} is not supported"
    if cap is None:
        return f"op {node.op} is not supported"
    lo, hi = cap.versions
    if not lo <= node.version <= hi:
        return f"op version {node.version} is outside the supported range {lo}-{hi}"
    tensors = subgraph.tensors
    inputs = [tensors[i] if i >= 0 else None for i in node.inputs]
    present = len([t for t in inputs if t is not None])
    if cap.max_inputs is not None and present > cap.max_inputs:
        return f"max_inputs: {present} inputs, at most {cap.max_inputs} supported"
    for pos in cap.constant_inputs:
        given = inputs[pos] if pos < len(inputs) else None
        if given is not None and not given.is_constant:
            return f"constant_inputs: input {pos} must be a constant, found a runtime tensor"
        if cap.constant_dtypes is not None and given is not None:
            name = _dtype_name(given)
            if name not in cap.constant_dtypes:
                return (
                    f"constant_dtypes: input {pos} is {name}, supported {list(cap.constant_dtypes)}"
                )
    for pos, t in enumerate(inputs):
        if t is None or t.is_constant:
            continue
        if _dtype_name(t) not in cap.dtypes:
            return f"dtypes: input {pos} is {_dtype_name(t)}, supported {list(cap.dtypes)}"
        if cap.max_rank is not None and len(t.shape) > cap.max_rank:
            return (
                f"max_rank: input {pos} has rank {len(t.shape)}, at most {cap.max_rank} supported"
            )
    out_field, out_dtypes = ("dtypes", cap.dtypes)
    if cap.output_dtypes is not None:
        out_field, out_dtypes = "output_dtypes", cap.output_dtypes
    for pos, i in enumerate(node.outputs):
        if i < 0:
            continue
        name = _dtype_name(tensors[i])
        if name not in out_dtypes:
            return f"{out_field}: output {pos} is {name}, supported {list(out_dtypes)}"
    if cap.fused_activations is not None:
        act = node.options.get("fused_activation_function")
        if act is not None and act not in cap.fused_activations:
            return f"fused_activations: {act} is not among {list(cap.fused_activations)}"
    if not cap.broadcast:
        shapes = {t.shape for t in inputs if t is not None and not t.is_constant}
        if len(shapes) > 1:
            return f"broadcast: inputs must have equal shapes, found {sorted(shapes)}"
    for key, want in cap.options.items():
        found = node.options.get(key)
        allowed = _allowed(want)
        if not any(_matches(found, w) for w in allowed):
            return f"options: {key} must be {_one_of(allowed)}, found {found!r}"
    return None

"""TFLite's schema as the ``tflite`` package generates it, read by reflection.

The loader (reading options), the model builder (writing them) and the node-options reference
page all need the same facts: which options table an op has, its fields in schema order,
their flatbuffer types and defaults, and which of them hold an enum. They are derived here
once from the generated code, so a newer ``tflite`` package brings its new ops and fields
without a table to update. Only what the generated Python cannot say is listed by hand
(:data:`_ENUM_OVERRIDES`: fields whose enum is not named after them).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import flatbuffers
import numpy as np
import tflite

__all__ = [
    "BUILTIN_OPS",
    "OPTION2_TYPES",
    "OPTION2_TYPE_NAMES",
    "OPTION_TYPES",
    "OPTION_TYPE_NAMES",
    "OptionField",
    "decode_option",
    "encode_option",
    "enum_names",
    "enum_values",
    "option_field_map",
    "option_fields",
    "options_type_for",
    "snake_case",
]


def enum_values(enum_cls: type) -> dict[str, int]:
    """A generated enum class as ``{name: value}``."""
    return {k: v for k, v in vars(enum_cls).items() if not k.startswith("_") and isinstance(v, int)}


def enum_names(enum_cls: type) -> dict[int, str]:
    """A generated enum class as ``{value: name}`` (the first name of an aliased value)."""
    names: dict[int, str] = {}
    for name, value in enum_values(enum_cls).items():
        names.setdefault(value, name)
    return names


def snake_case(name: str) -> str:
    """``DilationWFactor`` -> ``dilation_w_factor``: the field names of TFLite's schema."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


BUILTIN_OPS: dict[str, int] = enum_values(tflite.BuiltinOperator)
OPTION_TYPES: dict[str, int] = enum_values(tflite.BuiltinOptions)
OPTION_TYPE_NAMES: dict[int, str] = enum_names(tflite.BuiltinOptions)
# The second union (StableHLO ops, DILATE, REDUCE_WINDOW): an operator sets one union or the
# other, and no table name is in both, so a table's name says which union it belongs to.
OPTION2_TYPES: dict[str, int] = enum_values(tflite.BuiltinOptions2)
OPTION2_TYPE_NAMES: dict[int, str] = enum_names(tflite.BuiltinOptions2)

# The generated enums a field can hold; unions (BuiltinOptions, QuantizationDetails, ...)
# share the enum shape in Python but are table selectors, never field values.
_UNIONS = {"BuiltinOptions", "BuiltinOptions2", "QuantizationDetails", "SparseIndexVector"}
_ENUMS: dict[str, type] = {
    name: value
    for name, value in vars(tflite).items()
    if inspect.isclass(value)
    and name not in _UNIONS
    and not hasattr(value, "Init")
    and enum_values(value)
    and all(isinstance(v, int) for k, v in vars(value).items() if not k.startswith("_"))
}
# Enum fields whose enum's name cannot be found from the field's and table's names.
_ENUM_OVERRIDES: dict[str, str] = {
    "FusedActivationFunction": "ActivationFunctionType",
    "QuantizedBiasType": "TensorType",
    "OutType": "TensorType",
    "OutputType": "TensorType",
    "IdxOutType": "TensorType",
    "InDataType": "TensorType",
    "OutDataType": "TensorType",
    "KeyDtype": "TensorType",
    "ValueDtype": "TensorType",
}

# Ops whose options table is not named after the op (after dropping underscores and case).
_IRREGULAR_OPTIONS: dict[str, str] = {
    "AVERAGE_POOL_2D": "Pool2DOptions",
    "MAX_POOL_2D": "Pool2DOptions",
    "L2_POOL_2D": "Pool2DOptions",
    "L2_NORMALIZATION": "L2NormOptions",
    "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
    "MEAN": "ReducerOptions",
    "SUM": "ReducerOptions",
    "REDUCE_PROD": "ReducerOptions",
    "REDUCE_MAX": "ReducerOptions",
    "REDUCE_MIN": "ReducerOptions",
    "REDUCE_ANY": "ReducerOptions",
    "REDUCE_ALL": "ReducerOptions",
    "MAXIMUM": "MaximumMinimumOptions",
    "MINIMUM": "MaximumMinimumOptions",
    "CONV_3D_TRANSPOSE": "Conv3DOptions",
    "RANDOM_STANDARD_NORMAL": "RandomOptions",
    "RANDOM_UNIFORM": "RandomOptions",
    "MULTINOMIAL": "RandomOptions",
}
_OPTION_TYPES_FOLDED = {name.lower(): name for name in (*OPTION2_TYPES, *OPTION_TYPES)}

_NUMBER_TYPES: dict[str, np.dtype] = {
    "Bool": np.dtype(np.bool_),
    "Int8": np.dtype(np.int8),
    "Uint8": np.dtype(np.uint8),
    "Int16": np.dtype(np.int16),
    "Uint16": np.dtype(np.uint16),
    "Int32": np.dtype(np.int32),
    "Uint32": np.dtype(np.uint32),
    "Int64": np.dtype(np.int64),
    "Uint64": np.dtype(np.uint64),
    "Float32": np.dtype(np.float32),
    "Float64": np.dtype(np.float64),
}


def options_type_for(op: str) -> str | None:
    """The options table name for a builtin op name (from the schema's ``BuiltinOptions`` or
    ``BuiltinOptions2`` union), or None if the op has no options."""
    if op in _IRREGULAR_OPTIONS:
        return _IRREGULAR_OPTIONS[op]
    return _OPTION_TYPES_FOLDED.get(op.replace("_", "").lower() + "options")


@dataclass(frozen=True)
class OptionField:
    """One field of an options table, as the generated reader defines it.

    ``kind``: ``scalar``, ``vector`` (of numbers), ``string`` or ``table`` (a nested table
    or a vector of them). ``number_type``: the flatbuffers type of a scalar or of a vector's
    elements (``"Int32"``, ``"Float32"``, ``"Bool"``). ``enum``: the ``tflite`` enum class
    a scalar holds, by name, else None. ``default``: what a table without the field reads.
    """

    name: str
    getter: str
    offset: int
    kind: Literal["scalar", "vector", "string", "table"]
    number_type: str | None
    enum: str | None
    default: Any

    @property
    def dtype(self) -> np.dtype | None:
        """The numpy dtype of a scalar or vector element, None for strings and tables."""
        return _NUMBER_TYPES.get(self.number_type or "")

    @property
    def choices(self) -> dict[str, int]:
        """An enum field's names and values; empty for other fields."""
        return enum_values(_ENUMS[self.enum]) if self.enum else {}

    def read(self, table: Any) -> Any:
        """The field's value in an initialised reader, enums by name and vectors as tuples."""
        if self.kind == "vector":
            if not getattr(table, f"{self.getter}Length")():
                return ()
            return tuple(getattr(table, f"{self.getter}AsNumpy")().tolist())
        value = getattr(table, self.getter)()
        if self.kind == "string":
            return None if value is None else value.decode("utf-8", "replace")
        return decode_option(self, value) if self.kind == "scalar" else value


def decode_option(field: OptionField, value: Any) -> Any:
    """An enum field's stored number as its name; unknown numbers (a newer schema) stay."""
    if field.enum is None or not isinstance(value, int) or isinstance(value, bool):
        return value
    return enum_names(_ENUMS[field.enum]).get(value, value)


def encode_option(field: OptionField, value: Any) -> Any:
    """An enum field's name as its number; numbers pass through. KeyError for a wrong name."""
    if field.enum is None or not isinstance(value, str):
        return value
    return field.choices[value]


def _enum_for(table: str, camel: str, number_type: str | None) -> str | None:
    if number_type not in ("Int8", "Uint8", "Int16", "Int32"):
        return None
    if camel in _ENUM_OVERRIDES:
        return _ENUM_OVERRIDES[camel]
    stem = table.removesuffix("Options")
    for candidate in (camel, f"{camel}Type", f"{table}{camel}", f"{stem}{camel}"):
        if candidate in _ENUMS:
            return candidate
    return None


_OFFSET = re.compile(r"self\._tab\.Offset\((\d+)\)")
_SCALAR = re.compile(r"self\._tab\.Get\(flatbuffers\.number_types\.(\w+)Flags, o \+")
_ELEMENT = re.compile(r"number_types\.(\w+)Flags, a \+")


@functools.cache
def option_fields(type_name: str) -> tuple[OptionField, ...]:
    """The fields of the options table ``type_name``, in schema order (vtable offset)."""
    cls = getattr(tflite, type_name)
    default_table = _empty_table(type_name)
    fields = []
    for camel, method in vars(cls).items():
        if not camel[:1].isupper() or not callable(method) or camel == "Init":
            continue
        if camel.startswith("GetRootAs") or camel.endswith(("BufferHasIdentifier", "IsNone")):
            continue
        if camel.endswith(("AsNumpy", "Length")):
            continue
        source = inspect.getsource(method)
        offset = _OFFSET.search(source)
        if offset is None:
            continue
        kind: Literal["scalar", "vector", "string", "table"]
        if hasattr(cls, f"{camel}Length"):
            element = _ELEMENT.search(source)
            kind = "vector" if element and element.group(1) in _NUMBER_TYPES else "table"
            number_type = element.group(1) if kind == "vector" and element else None
        elif "self._tab.String(" in source:
            kind, number_type = "string", None
        elif (scalar := _SCALAR.search(source)) is not None:
            kind, number_type = "scalar", scalar.group(1)
        else:
            kind, number_type = "table", None
        field = OptionField(
            name=snake_case(camel),
            getter=camel,
            offset=int(offset.group(1)),
            kind=kind,
            number_type=number_type,
            enum=_enum_for(type_name, camel, number_type) if kind == "scalar" else None,
            default=None,
        )
        if kind != "table":
            field = dataclasses.replace(field, default=field.read(default_table))
        fields.append(field)
    return tuple(sorted(fields, key=lambda f: f.offset))


def _empty_table(type_name: str) -> Any:
    """A reader over a table of ``type_name`` with no fields set: its getters give defaults."""
    b = flatbuffers.Builder(16)
    getattr(tflite, f"{type_name}Start")(b)
    b.Finish(getattr(tflite, f"{type_name}End")(b))
    return getattr(tflite, type_name).GetRootAs(b.Output(), 0)


def option_field_map(type_name: str) -> Mapping[str, OptionField]:
    """:func:`option_fields` by snake_case name."""
    return {f.name: f for f in option_fields(type_name)}

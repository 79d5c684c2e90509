"""What a delegate declares it can run, as validated data.

Capabilities are pydantic models so that a malformed declaration fails when the plugin is
loaded (with the plugin's name), and so that the capability matrix, ``offload delegates`` and
the partitioner all read the same facts.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from tflite.utils import BUILTIN_OPCODE2NAME

from offload._graph import MODEL_TYPES, ModelType, Node, Subgraph

__all__ = ["OpCapability", "ModelTypeSupport", "Capabilities", "check_node", "DTYPE_NAMES"]

DTYPE_NAMES = (
    "float32",
    "float16",
    "int8",
    "uint8",
    "int16",
    "int32",
    "int64",
    "bool",
    "complex64",
)
DType = Literal[
    "float32", "float16", "int8", "uint8", "int16", "int32", "int64", "bool", "complex64"
]
_BUILTIN_NAMES = set(BUILTIN_OPCODE2NAME.values())


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class OpCapability(_Frozen):
    """One op a delegate runs, with the limits it cannot go past.

    Every limit here is checked by the core, which turns a failed check into a named reason
    (``"max_rank: input 0 has rank 5, at most 4 supported"``). Limits that data cannot express
    go in ``constraints`` as text and are enforced by the delegate's ``check_node``.
    """

    op: str
    versions: tuple[int, int] = (1, 1)
    dtypes: tuple[DType, ...] = ("float32",)
    max_rank: int | None = None
    fused_activations: tuple[str, ...] | None = None
    constant_inputs: tuple[int, ...] = ()
    max_inputs: int | None = None
    broadcast: bool = True
    options: dict[str, Any] = Field(default_factory=dict)
    constraints: tuple[str, ...] = ()

    @field_validator("op")
    @classmethod
    def _known_op(cls, op: str) -> str:
        if op not in _BUILTIN_NAMES:
            raise ValueError(f"unknown builtin op {op!r}")
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


class ModelTypeSupport(_Frozen):
    support: Literal["yes", "no", "partial"]
    reason: str = ""


class Capabilities(_Frozen):
    """A delegate's declaration: ops, model types, platforms, precisions and cost hints."""

    ops: tuple[OpCapability, ...]
    model_types: dict[ModelType, ModelTypeSupport]
    platforms: tuple[str, ...] = ("any",)
    precisions: tuple[Literal["float32", "float16", "int8"], ...] = ("float32",)
    # Cost hints for delegates="auto": how much faster than the CPU reference a delegated node
    # runs, and what one partition costs to enter and leave, in units of one CPU node.
    expected_speedup: float = Field(default=1.0, gt=0)
    partition_overhead: float = Field(default=5.0, ge=0)

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
        return self

    def op(self, name: str) -> OpCapability | None:
        for cap in self.ops:
            if cap.op == name:
                return cap
        return None


def _dtype_name(dtype: np.dtype) -> str:
    return "bool" if dtype == np.bool_ else str(dtype)


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
    if cap.max_inputs is not None and len([t for t in inputs if t is not None]) > cap.max_inputs:
        return f"max_inputs: {len(inputs)} inputs, at most {cap.max_inputs} supported"
    for pos in cap.constant_inputs:
        if pos < len(inputs) and inputs[pos] is not None and not inputs[pos].is_constant:
            return f"constant_inputs: input {pos} must be a constant, found a runtime tensor"
    for pos, t in enumerate(inputs):
        if t is None or t.is_constant:
            continue
        if _dtype_name(t.dtype) not in cap.dtypes:
            return f"dtype: input {pos} is {_dtype_name(t.dtype)}, supported {list(cap.dtypes)}"
        if cap.max_rank is not None and len(t.shape) > cap.max_rank:
            return (
                f"max_rank: input {pos} has rank {len(t.shape)}, at most {cap.max_rank} supported"
            )
    for pos, i in enumerate(node.outputs):
        t = tensors[i]
        if _dtype_name(t.dtype) not in cap.dtypes:
            return f"dtype: output {pos} is {_dtype_name(t.dtype)}, supported {list(cap.dtypes)}"
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
        if found != want:
            return f"options: {key} must be {want!r}, found {found!r}"
    return None

"""The tensor types each op accepts, declared once per op and checked before planning.

LiteRT's kernels check their tensor types in Prepare and refuse the rest ("Type BFLOAT16 is
not supported by ..."); a kernel that ran anyway would compute on bit patterns (BFLOAT16 read
as uint16), raw integers (an INT8 activation without a scale), or types the op has no
meaning for (LOGICAL_AND on floats). Each CPU reference kernel names its types in
``OpKernel.types``; :func:`check_node_types` holds every node of a model to them at
``allocate_tensors``, whichever engine later runs the node, since a node LiteRT cannot
prepare is not a valid node. ``scripts/probe_op_types.py`` records what LiteRT accepts, and
``tests/test_op_types.py`` keeps the declarations and that record in step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from offload.errors import TensorTypeError

if TYPE_CHECKING:
    from offload._graph import Node, Tensor

__all__ = ["ANY_STORED", "WEIGHTS", "OpTypes", "TypeRule", "accepts", "check_node_types", "one_of"]

# Every type LiteRT stores in a tensor buffer of its own, for ops that only move or view
# elements (RESHAPE); BFLOAT16 is not among them, as no LiteRT kernel takes it.
ANY_STORED = (
    "FLOAT32 FLOAT16 FLOAT64 COMPLEX64 INT4 INT8 UINT8 INT16 UINT16 INT32 UINT32 INT64 BOOL STRING"
)

# The 8- and 16-bit integer types whose values mean something only with a scale and zero
# point, in ops that rescale (an activation, an arithmetic op); data movement takes them raw.
QUANTIZABLE = ("INT8", "UINT8", "INT16")


@dataclasses.dataclass(frozen=True)
class TypeRule:
    """Tensor types one input or output may have: ``plain`` as they are, ``quantized`` only
    with quantization parameters."""

    plain: frozenset[str] = frozenset()
    quantized: frozenset[str] = frozenset()

    def violation(self, tensor: Tensor) -> str | None:
        """Why ``tensor`` breaks this rule, or None when it does not."""
        name = tensor.type_name
        if name in self.plain:
            return None
        if name in self.quantized:
            if tensor.quantization is not None and tensor.quantization.scale.size:
                return None
            return f"{name} without quantization parameters"
        return name

    def describe(self) -> str:
        parts = [", ".join(sorted(self.plain))] if self.plain else []
        if self.quantized:
            parts.append(", ".join(sorted(self.quantized)) + " with quantization parameters")
        return "; ".join(parts) or "no type"


def one_of(plain: str = "", quantized: str = "") -> TypeRule:
    """A :class:`TypeRule` from space-separated TensorType names."""
    return TypeRule(frozenset(plain.split()), frozenset(quantized.split()))


@dataclasses.dataclass(frozen=True)
class OpTypes:
    """An op's accepted tensor types.

    ``inputs``: a rule by input position (an omitted or absent input is not checked).
    ``same``: the data inputs' positions; their tensors must share one type, as LiteRT's
    binary kernels ask, and the first is the one an output's type follows.
    ``outputs``: the rule for every output, or by output position; an output it does not
    rule must have the type of the first ``same`` input (or input 0), under that input's
    rule, as in most ops.
    ``across``: a rule no single position can state, as a type that follows another
    tensor's type and the node's options (a convolution's bias follows its input's); given
    the node and the subgraph's tensors, it returns why the node breaks it, or None.
    """

    inputs: Mapping[int, TypeRule]
    same: tuple[int, ...] = ()
    outputs: TypeRule | Mapping[int, TypeRule] | None = None
    # The rule of every input of an op of any arity (CONCATENATION), all of one type.
    variadic: TypeRule | None = None
    across: Callable[[Node, Sequence[Tensor]], str | None] | None = None


def accepts(
    plain: str = "",
    quantized: str = "",
    *,
    data: Sequence[int] | str = (0,),
    output: TypeRule | Mapping[int, TypeRule] | None = None,
    others: Mapping[int, TypeRule] | None = None,
    across: Callable[[Node, Sequence[Tensor]], str | None] | None = None,
) -> OpTypes:
    """The common shape of a declaration: the data inputs at positions ``data`` share one type
    from ``plain`` (or ``quantized``, with parameters), the outputs have that type unless
    ``output`` says otherwise, and ``others`` rules the remaining inputs (index operands).
    ``data="all"`` makes every input a data input, for ops of any arity; ``across`` is
    :class:`OpTypes`'."""
    rule = one_of(plain, quantized)
    if data == "all":
        return OpTypes(dict(others or {}), (), output, variadic=rule, across=across)
    assert not isinstance(data, str)
    inputs = {position: rule for position in data}
    inputs.update(others or {})
    return OpTypes(inputs, tuple(data), output, across=across)


def check_node_types(node: Node, tensors: Sequence[Tensor], declared: OpTypes) -> None:
    """Raise TensorTypeError naming the node, the tensor, the type found and the types
    allowed, where a tensor of ``node`` breaks its op's declaration."""

    def tensor_at(position: int, indices: Sequence[int]) -> Tensor | None:
        if position >= len(indices) or indices[position] < 0:
            return None
        return tensors[indices[position]]

    def refuse(what: str, tensor: Tensor, found: str, allowed: str) -> None:
        raise TensorTypeError(
            f"{node.describe()}: {what} ({tensor.name!r}) is {found}; {node.op} takes {allowed}"
        )

    rules = dict(declared.inputs)
    same = declared.same
    if declared.variadic is not None:
        rules.update(dict.fromkeys(range(len(node.inputs)), declared.variadic))
        same = tuple(range(len(node.inputs)))
    for position, rule in sorted(rules.items()):
        tensor = tensor_at(position, node.inputs)
        if tensor is not None and (found := rule.violation(tensor)) is not None:
            refuse(f"input {position}", tensor, found, rule.describe())
    anchors = [t for p in same or (0,) if (t := tensor_at(p, node.inputs)) is not None]
    for position in same[1:]:
        tensor = tensor_at(position, node.inputs)
        if anchors and tensor is not None and tensor.type_name != anchors[0].type_name:
            refuse(
                f"input {position}",
                tensor,
                tensor.type_name,
                f"inputs of one type (input {same[0]} is {anchors[0].type_name})",
            )
    data_rule = rules.get((same or (0,))[0])
    for position, index in enumerate(node.outputs):
        if index < 0:
            continue
        tensor = tensors[index]
        outputs = declared.outputs
        ruled = outputs.get(position) if isinstance(outputs, Mapping) else outputs
        if ruled is not None:
            if (found := ruled.violation(tensor)) is not None:
                refuse(f"output {position}", tensor, found, ruled.describe())
        elif anchors and tensor.type_name != anchors[0].type_name:
            refuse(
                f"output {position}",
                tensor,
                tensor.type_name,
                f"an output of its input's type ({anchors[0].type_name})",
            )
        elif data_rule is not None and (found := data_rule.violation(tensor)) is not None:
            refuse(f"output {position}", tensor, found, data_rule.describe())
    if declared.across is not None:
        why = declared.across(node, tensors)
        if why is not None:
            raise TensorTypeError(f"{node.describe()}: {why}")


# The weights of a convolution or a fully connected layer: float, or integers with their
# quantization parameters (a hybrid model's float layers, an integer model's). LiteRT's
# kernels read a scale for every integer weight; one without is no valid weight.
WEIGHTS = one_of("FLOAT32", "INT4 INT8 UINT8")

"""A partition as a standalone .tflite model, for delegates that hand their nodes to another
runtime that reads .tflite (LiteRT, OpenVINO, a vendor SDK).

The model is written from the subgraph the delegate was given, so constants arrive as the
core folded them (float16 and sparse weights as plain constants), and through the one
.tflite writer of :mod:`offload.model._writer`. Everything else is copied as the file had
it: operator codes and versions, builtin options (either union), custom codes and options,
quantization (per channel, ``quantized_dimension``), sparse storage, ``shape_signature``,
variable tensors, and the subgraphs that control-flow ops call.

State: a variable tensor that only the partition's nodes use stays a variable of the exported
model, so the runtime keeps it across invokes as LiteRT does, together with the DEQUANTIZE /
DENSIFY of constants that give it its first value. Nothing else crosses the boundary but
the inputs and outputs :class:`ExportedPartition` lists.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import tflite

from offload._fold import FOLDABLE_OPS
from offload._graph import Model, Node, OpOptions, Subgraph, Tensor
from offload._loader import TENSOR_TYPES
from offload._partition import Partition, finish_partition, node_ranges
from offload._schema import (
    BUILTIN_OPS,
    OPTION2_TYPES,
    OPTION_TYPES,
    encode_option,
    option_field_map,
)
from offload.errors import PartitionExportError
from offload.model._writer import OperatorSpec, TensorSpec
from offload.model.builder import ModelBuilder, SubgraphBuilder

__all__ = ["ExportedPartition", "check_exportable", "export_partition", "partition_fingerprint"]

_TYPE_IDS = {name: type_id for type_id, (name, _) in TENSOR_TYPES.items()}
# Tensors a runtime cannot be handed from outside: a resource is a handle into the runtime's
# own variable table, a variant a runtime-owned object (a TensorList).
_HANDLE_TYPES = frozenset({"RESOURCE", "VARIANT"})
# A flatbuffer addresses at most 2 GiB; LiteRT's larger models put buffers outside it, which
# the writer does not do.
_MAX_MODEL_BYTES = 2**31 - 2**20


@dataclass(frozen=True)
class ExportedPartition:
    """A partition written as a standalone .tflite model by :func:`export_partition`.

    ``model_bytes``: the model. Its main subgraph (0) holds the partition's nodes; the
    subgraphs that its control-flow ops call follow.

    ``inputs``: the original tensor index of each input of the exported model, in the model's
    input order: ``partition.inputs`` in their order, less the ``state`` the model keeps
    itself. ``input_positions``: where each of them sits in ``partition.inputs``, the order in
    which ``DelegateKernel.invoke`` receives its arrays. ``outputs``: the original tensor index
    of each output, in order: exactly ``partition.outputs``.

    ``state``: variable tensors among ``partition.inputs`` that only this partition uses; the
    exported model keeps them as variables (a runtime carries them across invokes and resets
    them with its own ``reset_all_variables``), so they are not inputs.

    ``nodes``: the original node index of each operator of the main subgraph, in order: the
    partition's nodes, and the DEQUANTIZE / DENSIFY of constants that initialise ``state``.
    ``tensors``: the original tensor index of each tensor of the main subgraph.
    ``subgraphs``: the original subgraph index of each exported subgraph (the partition's own
    first). ``partition``: the partition exported (made from the node list when one was given).
    """

    model_bytes: bytes = field(repr=False)
    inputs: tuple[int, ...]
    input_positions: tuple[int, ...]
    outputs: tuple[int, ...]
    state: tuple[int, ...]
    nodes: tuple[int, ...]
    tensors: tuple[int, ...]
    subgraphs: tuple[int, ...]
    partition: Partition


# -- what one node needs --------------------------------------------------------------------


def _calls(node: Node) -> Iterator[tuple[str, int]]:
    """(options field, subgraph index) of each subgraph ``node`` calls: WHILE's cond and body,
    IF's branches, CALL_ONCE's init, the StableHLO regions, CALL's subgraph."""
    for key, value in node.options.items():
        if key.endswith("subgraph_index") or (key == "subgraph" and isinstance(value, int)):
            yield key, int(value)


def _options_reason(options: OpOptions) -> str | None:
    name = options.type_name
    if name == "NoOptions":
        return None
    if (name not in OPTION_TYPES and name not in OPTION2_TYPES) or not hasattr(tflite, name):
        return (
            f"its options table {name} is not in the installed tflite schema, so offload could "
            "not read it and cannot write it back (a newer tflite package may know it)"
        )
    nested = [f.name for f in option_field_map(name).values() if f.kind == "table"]
    if nested:
        return f"its options table {name} has nested tables ({', '.join(nested)}), not copied"
    return None


def _builtin_code(node: Node) -> int | None:
    return node.builtin_code if node.builtin_code >= 0 else BUILTIN_OPS.get(node.op)


def _node_reason(node: Node, subgraph: Subgraph, root: int, seen: set[int]) -> str | None:
    if node.op == "CUSTOM" and not node.custom_code:
        return (
            f"{node.describe()} is a CUSTOM operator without a custom code: nothing names the "
            "op for another runtime to resolve"
        )
    if _builtin_code(node) is None:
        return f"{node.describe()}: op {node.op!r} has no builtin code to write"
    reason = _options_reason(node.options)
    if reason is not None:
        return f"{node.describe()}: {reason}"
    for key, k in _calls(node):
        model = subgraph.model
        where = f"{node.describe()} calls subgraph {k} ({key})"
        if model is None:
            return (
                f"{where}, but subgraph {subgraph.index} belongs to no loaded model to take "
                "it from (load the model with offload.load_model)"
            )
        if not 0 <= k < len(model.subgraphs):
            return f"{where}, but the model has {len(model.subgraphs)} subgraphs"
        if k == root:
            return f"{where}, the subgraph it is in: recursion, which TFLite does not allow"
        if k in seen:
            continue
        seen.add(k)
        called = model.subgraphs[k]
        for inner in called.nodes:
            reason = _node_reason(inner, called, root, seen)
            if reason is not None:
                return f"{where}, which cannot be exported: {reason}"
    return None


def check_exportable(node: Node, subgraph: Subgraph) -> str | None:
    """None if :func:`export_partition` can write ``node``, else the reason it cannot.

    Cheap (no model is built), so a delegate that hands its partitions to another runtime
    calls it from ``check_node`` and declines such nodes through the normal capability path::

        def check_node(self, node, subgraph):
            return offload.check_exportable(node, subgraph)

    Refused: a CUSTOM operator without a custom code; options in a table the installed
    ``tflite`` schema does not know; a call (WHILE, IF, CALL_ONCE, StableHLO regions) to a
    subgraph that is missing, recursive or itself not exportable. What depends on the whole
    partition (state or a resource tensor shared across its boundary) is refused by
    :func:`export_partition` itself.
    """
    return _node_reason(node, subgraph, subgraph.index, set())


# -- the partition --------------------------------------------------------------------------


def _refuse(partition: Partition, message: str) -> PartitionExportError:
    return PartitionExportError(
        f"partition {partition.index} ({partition.delegate}, nodes "
        f"{node_ranges(partition.nodes)}) cannot be exported: {message}"
    )


def _as_partition(subgraph: Subgraph, partition: Partition | Sequence[int]) -> Partition:
    if isinstance(partition, Partition):
        nodes: Sequence[int] = partition.nodes
    else:
        nodes = list(partition)
    count = len(subgraph.nodes)
    bad = [n for n in nodes if not isinstance(n, (int, np.integer)) or not 0 <= n < count]
    if bad or len(set(nodes)) != len(nodes) or not nodes:
        found = f"{bad[:5]} out of range" if bad else "no nodes" if not nodes else "repeated nodes"
        raise PartitionExportError(
            f"expected distinct node indices of subgraph {subgraph.index} (0..{count - 1}), "
            f"found {found}"
        )
    if isinstance(partition, Partition):
        return partition
    return finish_partition(subgraph, 0, "export", [int(n) for n in nodes])


def _state_chain(
    subgraph: Subgraph, v: int, producers: dict[int, int], members: set[int]
) -> list[int] | str:
    """The DEQUANTIZE / DENSIFY of constants outside the partition that make variable ``v``'s
    first value, or why what writes ``v`` cannot come along."""
    chain: list[int] = []
    pending = [v]
    while pending:
        t = pending.pop()
        p = producers.get(t)
        if p is None or p in members or p in chain:
            continue
        node = subgraph.nodes[p]
        if node.op not in FOLDABLE_OPS or node.is_custom:
            return f"it is written by {node.describe()} outside the partition"
        for i in node.inputs:
            if i >= 0 and not subgraph.tensors[i].is_constant:
                if i not in producers:
                    return f"its initialiser {node.describe()} reads runtime tensor {i}"
                pending.append(i)
        chain.append(p)
    return chain


def _resources(node: Node, model: Model | None, seen: set[int]) -> set[tuple[object, ...]]:
    """The runtime tables ``node`` reaches, directly or through the subgraphs it calls: a
    VAR_HANDLE's variable (by container and shared name), a HASHTABLE's table (by id)."""
    keys: set[tuple[object, ...]] = set()
    if node.op == "VAR_HANDLE":
        keys.add(("variable", node.options.get("container"), node.options.get("shared_name")))
    elif node.op == "HASHTABLE":
        keys.add(("hashtable", node.options.get("table_id")))
    for _, k in _calls(node):
        if model is not None and k not in seen and 0 <= k < len(model.subgraphs):
            seen.add(k)
            for inner in model.subgraphs[k].nodes:
                keys |= _resources(inner, model, seen)
    return keys


def _shared_resource(subgraph: Subgraph, partition: Partition) -> str | None:
    """Why the partition cannot take its resource variables or tables along, if it cannot:
    a runtime keeps them in its own table, so every node that uses one must come along."""
    members = set(partition.nodes)
    model = subgraph.model
    mine: dict[tuple[object, ...], int] = {}
    for n in partition.nodes:
        for key in _resources(subgraph.nodes[n], model, set()):
            mine.setdefault(key, n)
    if not mine:
        return None
    for node in subgraph.nodes:
        if node.index in members:
            continue
        shared = _resources(node, model, set()) & mine.keys()
        if shared:
            key = min(shared, key=repr)
            what = f"variable {key[2]!r}" if key[0] == "variable" else f"hash table {key[1]}"
            return (
                f"resource {what}, used by {subgraph.nodes[mine[key]].describe()}, is also used "
                f"by {node.describe()} outside the partition; a runtime keeps it in its own "
                "table, which two models cannot share (put every node that uses it in one "
                "partition)"
            )
    return None


@dataclass
class _Boundary:
    inputs: list[int]
    positions: list[int]
    state: list[int]
    chain: list[int]


def _boundary(subgraph: Subgraph, partition: Partition) -> _Boundary:
    """Check the partition against the subgraph and split its inputs into inputs and state."""
    nodes = subgraph.nodes
    tensors = subgraph.tensors
    members = set(partition.nodes)
    produced = {t for n in partition.nodes for t in nodes[n].outputs if t >= 0}
    listed = set(partition.inputs)
    for n in partition.nodes:
        reason = check_exportable(nodes[n], subgraph)
        if reason is not None:
            raise _refuse(partition, reason)
        folded = [t for t in nodes[n].outputs if t >= 0 and tensors[t].is_constant]
        if folded:
            raise _refuse(
                partition,
                f"{nodes[n].describe()} writes tensor {folded[0]}, which is a constant here (the "
                "core folded it); leave folded nodes out of partitions",
            )
        for t in nodes[n].inputs:
            if t < 0 or t in produced or t in listed or tensors[t].is_constant:
                continue
            raise _refuse(
                partition,
                f"{nodes[n].describe()} reads tensor {t} ({tensors[t].name!r}), which is neither "
                "a partition input nor a constant of this subgraph (pass the subgraph the "
                "partition was planned on: the one DelegateKernel.init receives)",
            )
    read = {t for n in partition.nodes for t in nodes[n].inputs}
    for t in partition.inputs:
        if t in produced or t not in read:
            what = "written inside the partition" if t in produced else "read by none of its nodes"
            raise _refuse(partition, f"input tensor {t} is {what}")
    for t in partition.outputs:
        if t not in produced:
            raise _refuse(partition, f"output tensor {t} is not written inside the partition")

    producers = subgraph.producers()
    consumers = subgraph.consumers()
    graph_outputs = set(subgraph.outputs)
    boundary = _Boundary([], [], [], [])
    for position, t in enumerate(partition.inputs):
        if not tensors[t].is_variable:
            boundary.inputs.append(t)
            boundary.positions.append(position)
            continue
        what = f"variable tensor {t} ({tensors[t].name!r})"
        outside = [c for c in consumers.get(t, ()) if c not in members]
        if outside:
            raise _refuse(
                partition,
                f"{what} is also read by {nodes[outside[0]].describe()} outside the partition; "
                "its state cannot live in two places (put every node that uses it in one "
                "partition)",
            )
        if t in graph_outputs:
            raise _refuse(partition, f"{what} is a model output; its state must stay visible")
        chain = _state_chain(subgraph, t, producers, members)
        if isinstance(chain, str):
            raise _refuse(partition, f"{what} holds state, but {chain}")
        boundary.state.append(t)
        boundary.chain.extend(n for n in chain if n not in boundary.chain)
    shared = _shared_resource(subgraph, partition)
    if shared is not None:
        raise _refuse(partition, shared)
    for t in (*boundary.inputs, *partition.outputs):
        if tensors[t].type_name in _HANDLE_TYPES:
            raise _refuse(
                partition,
                f"tensor {t} ({tensors[t].name!r}) of type {tensors[t].type_name} crosses its "
                "boundary; a runtime's handle cannot be passed in or out (put its producer and "
                "its users in one partition)",
            )
    return boundary


# -- writing --------------------------------------------------------------------------------


class _Writer:
    """Fills a ModelBuilder with copies of graph tensors and nodes, sharing buffers that the
    source shares."""

    def __init__(self, description: str) -> None:
        self.builder = ModelBuilder(description, signature_key=None)
        self.buffers: dict[tuple[int, int], int] = {}
        self.total = 0

    def buffer(self, data: np.ndarray) -> int:
        key = (data.__array_interface__["data"][0], data.nbytes)
        if key not in self.buffers:
            array = np.ascontiguousarray(data)
            if array.dtype.byteorder == ">":
                array = array.astype(array.dtype.newbyteorder("<"))
            self.buffers[key] = self.builder._add_buffer(self.payload(array))
            self.total += array.nbytes
        return self.buffers[key]

    def payload(self, array: np.ndarray) -> bytes:
        """What a constant's buffer holds: its little-endian bytes."""
        return array.tobytes()

    def tensor(self, sb: SubgraphBuilder, tensor: Tensor, runtime: bool, variable: bool) -> None:
        """Copy ``tensor``; ``runtime`` drops its constant value (a constant made an input)."""
        data = None if runtime else tensor.data
        signature = tensor.shape_signature
        sb.tensors.append(
            TensorSpec(
                name=tensor.name,
                shape=tensor.shape,
                type_id=_TYPE_IDS[tensor.type_name],
                buffer=0 if data is None or data.nbytes == 0 else self.buffer(data),
                quantization=tensor.quantization,
                # Without a dynamic dimension the signature says no more than the shape, which
                # the core may have corrected (a converter's placeholder): LiteRT then reads
                # the shape, as it does for a file that has no signature.
                shape_signature=signature if any(d < 0 for d in signature) else None,
                is_variable=variable,
                sparsity=None if data is None else tensor.sparsity,
            )
        )

    def operator(
        self, sb: SubgraphBuilder, node: Node, tensor_map: dict[int, int], sg_map: dict[int, int]
    ) -> None:
        builtin = _builtin_code(node)
        assert builtin is not None  # check_exportable refused the node otherwise
        opcode = self.builder._opcode(builtin, node.custom_code, node.version)
        options_type = None if node.options.type_name == "NoOptions" else node.options.type_name
        sb.operators.append(
            OperatorSpec(
                opcode=opcode,
                inputs=tuple(tensor_map[t] if t >= 0 else -1 for t in node.inputs),
                outputs=tuple(tensor_map[t] if t >= 0 else -1 for t in node.outputs),
                options_type=options_type,
                options=_encoded(node, sg_map) if options_type else {},
                custom_options=node.custom_options,
                intermediates=tuple(tensor_map[t] for t in node.intermediates if t >= 0),
            )
        )


def _encoded(node: Node, sg_map: dict[int, int]) -> dict[str, object]:
    """Node options as the writer takes them: enums as numbers, called subgraphs renumbered."""
    fields = option_field_map(node.options.type_name)
    calls = dict(_calls(node))
    out: dict[str, object] = {}
    for key, value in node.options.items():
        field = fields.get(key)
        if field is None or field.kind == "table" or value is None:
            continue
        if key in calls:
            value = sg_map[calls[key]]
        elif field.kind == "scalar":
            value = encode_option(field, value)
        out[key] = value
    return out


def _called_subgraphs(subgraph: Subgraph, nodes: Sequence[int]) -> list[int]:
    """Every subgraph the nodes call, directly or through other calls, in the order found."""
    model = subgraph.model
    found: list[int] = []
    pending = [subgraph.nodes[n] for n in nodes]
    while pending:
        node = pending.pop(0)
        for _, k in _calls(node):
            if k not in found:
                assert model is not None  # check_exportable refused the node otherwise
                found.append(k)
                pending.extend(model.subgraphs[k].nodes)
    return found


class _Digests(_Writer):
    """A writer whose buffers hold each constant's SHA-256 instead of its bytes: the model it
    builds is small, and names the exported model exactly (see partition_fingerprint).
    ``ahead``: digests under way, by the array's address and size."""

    def __init__(self, description: str, ahead: dict[tuple[int, int], Future[bytes]]) -> None:
        super().__init__(description)
        self.ahead = ahead

    def payload(self, array: np.ndarray) -> bytes:
        found = self.ahead.get((array.__array_interface__["data"][0], array.nbytes))
        return found.result() if found is not None else _digest(array)


def _digest(array: np.ndarray) -> bytes:
    if array.dtype.hasobject:
        return hashlib.sha256(array.tobytes()).digest()
    # hashlib reads the array's memory in place (no copy) and releases the GIL meanwhile.
    return hashlib.sha256(array.reshape(-1).view(np.uint8).data).digest()


# Constants at least this large are hashed on a thread pool (hashlib runs without the GIL)
# while the digest model is written: on a network's weights, hashing is most of a fingerprint.
_PARALLEL_BYTES = 1 << 16


def _digests_ahead(
    pool: ThreadPoolExecutor, subgraph: Subgraph, partition: Partition
) -> dict[tuple[int, int], Future[bytes]]:
    """Start hashing the partition's large constants on ``pool``, largest first."""
    big: dict[tuple[int, int], np.ndarray] = {}
    for n in partition.nodes:
        for t in subgraph.nodes[n].inputs:
            data = subgraph.tensors[t].data if t >= 0 else None
            if (
                data is None
                or data.nbytes < _PARALLEL_BYTES
                or data.dtype.hasobject
                or not data.flags.c_contiguous
                or data.dtype.byteorder == ">"
            ):
                continue
            big[(data.__array_interface__["data"][0], data.nbytes)] = data
    ordered = sorted(big.items(), key=lambda item: -item[1].nbytes)
    return {where: pool.submit(_digest, data) for where, data in ordered}


def _write(writer: _Writer, subgraph: Subgraph, partition: Partition) -> _Written:
    """Fill ``writer`` with ``partition`` of ``subgraph``: the one description of what an
    exported model holds, shared by export_partition and partition_fingerprint."""
    boundary = _boundary(subgraph, partition)
    model = subgraph.model
    called = _called_subgraphs(subgraph, partition.nodes)
    sg_map = {k: i + 1 for i, k in enumerate(called)}
    main = writer.builder
    main.name = subgraph.name

    order = sorted({*partition.nodes, *boundary.chain})
    nodes = [subgraph.nodes[n] for n in order]
    used = sorted(
        {t for node in nodes for t in (*node.inputs, *node.outputs, *node.intermediates) if t >= 0}
    )
    inputs = set(boundary.inputs)
    crossing = inputs | set(partition.outputs)
    tensor_map = {t: i for i, t in enumerate(used)}
    for t in used:
        tensor = subgraph.tensors[t]
        writer.tensor(main, tensor, t in inputs, tensor.is_variable and t not in crossing)
    for node in nodes:
        writer.operator(main, node, tensor_map, sg_map)
    main.inputs = [tensor_map[t] for t in boundary.inputs]
    main.outputs = [tensor_map[t] for t in partition.outputs]

    for k in called:
        assert model is not None
        original = model.subgraphs[k]
        sb = main.add_subgraph(original.name)
        identity = {t.index: t.index for t in original.tensors}
        for tensor in original.tensors:
            writer.tensor(sb, tensor, False, tensor.is_variable)
        for node in original.nodes:
            writer.operator(sb, node, identity, sg_map)
        sb.inputs = list(original.inputs)
        sb.outputs = list(original.outputs)

    if writer.total > _MAX_MODEL_BYTES:
        raise _refuse(
            partition,
            f"its constants take {writer.total:,} bytes, past the 2 GiB a flatbuffer can hold",
        )
    return _Written(boundary, tuple(order), tuple(used), (subgraph.index, *called))


@dataclass
class _Written:
    boundary: _Boundary
    nodes: tuple[int, ...]
    tensors: tuple[int, ...]
    subgraphs: tuple[int, ...]


def _description(partition: Partition) -> str:
    # Nothing about where the model came from goes in: equal partitions give equal bytes, which
    # an engine's cache can key on.
    return f"offload.export_partition: nodes {node_ranges(partition.nodes)}"


def export_partition(subgraph: Subgraph, partition: Partition | Sequence[int]) -> ExportedPartition:
    """Write ``partition`` of ``subgraph`` as a standalone .tflite model.

    ``subgraph``: the subgraph the partition was planned on, as ``DelegateKernel.init``
    receives it (constants folded). ``partition``: a :class:`Partition`, or node indices of
    ``subgraph`` whose boundary is then computed as the planner computes it. The result
    lists the exported model's inputs and outputs as original tensor indices, in the model's
    order (see :class:`ExportedPartition`).

    Raises :class:`offload.errors.PartitionExportError` naming the node or tensor when the
    partition cannot be exported: a node :func:`check_exportable` refuses, a folded node or a
    tensor the subgraph does not provide, state or a resource tensor shared across the
    boundary, a model past the flatbuffer's 2 GiB.
    """
    partition = _as_partition(subgraph, partition)
    writer = _Writer(_description(partition))
    written = _write(writer, subgraph, partition)
    boundary = written.boundary
    return ExportedPartition(
        model_bytes=writer.builder.build(),
        inputs=tuple(boundary.inputs),
        input_positions=tuple(boundary.positions),
        outputs=tuple(partition.outputs),
        state=tuple(boundary.state),
        nodes=written.nodes,
        tensors=written.tensors,
        subgraphs=written.subgraphs,
        partition=partition,
    )


def partition_fingerprint(subgraph: Subgraph, partition: Partition | Sequence[int]) -> str:
    """A hex SHA-256 digest naming the model :func:`export_partition` writes for ``partition``,
    without writing it.

    Equal fingerprints mean equal exported models: the digest covers everything the exported
    model holds (operators, versions, options, tensors, quantization, called subgraphs) and
    every constant's bytes. So a delegate that caches what its runtime compiled from the
    exported model keys the cache on this, and on a hit skips the export (which copies every
    constant) and the runtime's own reading of the model. It costs one pass over the
    constants (SHA-256), a fraction of an export. Raises what :func:`export_partition`
    raises, for the same partitions.
    """
    partition = _as_partition(subgraph, partition)
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        writer = _Digests(_description(partition), _digests_ahead(pool, subgraph, partition))
        try:
            _write(writer, subgraph, partition)
        finally:
            for future in writer.ahead.values():
                future.cancel()
    return hashlib.sha256(b"offload.partition_fingerprint 1\n" + writer.builder.build()).hexdigest()

"""The dummy delegate: LiteRT's teaching example, in Python.

It takes only ADD and SUB on float32 tensors of equal shape (no broadcasting, no fused
activation) and computes them with numpy. Read it top to bottom: it is the whole contract.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import offload
from offload import Capabilities, Delegate, DelegateKernel, ModelTypeSupport, OpCapability

__version__ = "0.1.0"

_NOT_FLOAT = ModelTypeSupport(support="no", reason="ADD/SUB on float32 tensors only")


class DummyKernel(DelegateKernel):
    """Runs one partition: its nodes in order, on arrays it keeps between nodes."""

    def init(self, subgraph: offload.Subgraph, partition: offload.Partition) -> None:
        self.partition = partition
        self.steps = [
            (np.add if node.op == "ADD" else np.subtract, node.inputs, node.outputs[0])
            for node in (subgraph.nodes[n] for n in partition.nodes)
        ]
        self.constants = {t: subgraph.tensors[t].constant_value() for t in partition.constants}

    def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        values = dict(self.constants)
        values.update(zip(self.partition.inputs, inputs))
        for func, (a, b), out in self.steps:
            values[out] = func(values[a], values[b])
        return [values[t] for t in self.partition.outputs]


class DummyDelegate(Delegate):
    name = "dummy"
    version = __version__
    CAPABILITIES = Capabilities(
        ops=(
            OpCapability(op="ADD", max_inputs=2, broadcast=False, fused_activations=("NONE",)),
            OpCapability(op="SUB", max_inputs=2, broadcast=False, fused_activations=("NONE",)),
        ),
        model_types={
            "float32": ModelTypeSupport(support="partial", reason="ADD and SUB only"),
            "float16": _NOT_FLOAT,
            "dynamic_range": _NOT_FLOAT,
            "int8": _NOT_FLOAT,
            "qat": _NOT_FLOAT,
        },
        expected_speedup=1.0,
    )

    def check_node(self, node: offload.Node, subgraph: offload.Subgraph) -> str | None:
        shapes = {subgraph.tensors[i].shape for i in node.inputs}
        if len(shapes) != 1:
            return f"inputs must have equal shapes (no broadcasting), found {sorted(shapes)}"
        return None

    def create_kernel(self) -> DummyKernel:
        return DummyKernel()


@offload.hookimpl
def offload_register_delegates() -> list[type[Delegate]]:
    return [DummyDelegate]


@offload.hookimpl
def offload_delegate_providers() -> list[offload.DelegateProvider]:
    return [
        offload.DelegateProvider(
            delegate="dummy",
            enable_flag="--use_dummy_delegate",
            help="run ADD/SUB on the dummy delegate (LiteRT's teaching example)",
        )
    ]

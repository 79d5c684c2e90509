"""A delegate that takes its time, and says which process is running it.

The node-loss test needs a sweep that is still running when a node is killed, and a sign
that the node's worker is in the middle of a shard at that moment. This delegate computes
ADD on float32 as the dummy delegate does (so its figures equal the CPU reference's),
sleeps ``pause_ms`` per invoke, and counts its invokes per process: one byte appended per
invoke to a file named after the process's pid in the folder ``$OFFLOAD_TEST_MARKS`` (when
set), so a file's size is how far that process has gone.

Loaded by module name (``tests.ray._paced_delegate:pause_ms=5``), so a Ray worker finds it
wherever the repository is on its ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import numpy as np

import offload
from offload import (
    Capabilities,
    Delegate,
    DelegateKernel,
    DelegateOptions,
    ModelTypeSupport,
    OpCapability,
)

MARKS_ENV = "OFFLOAD_TEST_MARKS"
_tally: int | None = None  # this process's file, opened at its first invoke


class PacedOptions(DelegateOptions):
    pause_ms: float = 5.0


class PacedKernel(DelegateKernel):
    def __init__(self, pause_s: float) -> None:
        self.pause_s = pause_s

    def init(self, subgraph: offload.Subgraph, partition: offload.Partition) -> None:
        self.partition = partition
        self.constants = {t: subgraph.tensors[t].constant_value() for t in partition.constants}
        self.steps = [
            (subgraph.nodes[n].inputs, subgraph.nodes[n].outputs[0]) for n in partition.nodes
        ]

    def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        global _tally
        if _tally is None and os.environ.get(MARKS_ENV):
            path = os.path.join(os.environ[MARKS_ENV], str(os.getpid()))
            _tally = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        if _tally is not None:
            os.write(_tally, b".")
        time.sleep(self.pause_s)
        values = dict(self.constants)
        values.update(zip(self.partition.inputs, inputs))
        for (a, b), out in self.steps:
            values[out] = np.add(values[a], values[b])
        return [values[t] for t in self.partition.outputs]


class PacedDelegate(Delegate):
    name = "paced"
    version = "0.0.1"
    Options = PacedOptions
    CAPABILITIES = Capabilities(
        ops=(OpCapability(op="ADD", max_inputs=2, broadcast=False, fused_activations=("NONE",)),),
        model_types={
            t: ModelTypeSupport(support="yes" if t == "float32" else "no", reason="float32 only")
            for t in ("float32", "float16", "dynamic_range", "int8", "qat")
        },
    )

    def check_node(self, node: offload.Node, subgraph: offload.Subgraph) -> str | None:
        shapes = {subgraph.tensors[i].shape for i in node.inputs}
        if len(shapes) != 1:
            return f"inputs must have equal shapes (no broadcasting), found {sorted(shapes)}"
        return None

    def create_kernel(self) -> PacedKernel:
        return PacedKernel(self.options.pause_ms / 1e3)

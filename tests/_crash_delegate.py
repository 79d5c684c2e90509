"""A delegate that kills its process, as an engine crashing in native code would.

Loaded by module name (``tests._crash_delegate``) or as a sweep configuration
(``tests._crash_delegate:when=invoke``), so that a spawned worker finds it without an install.
It takes ADD on float32 (the dummy delegate's rule) and ends the process with ``os._exit``
when its kernel is initialised (``when=init``) or invoked (``when=invoke``, the default):
no Python exception, no exit handlers, what a segmentation fault in an engine looks like to
the process that ran it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Literal

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

# The exit status of a process this delegate ends (an engine's abort would be -SIGABRT).
EXIT_STATUS = 70


class CrashOptions(DelegateOptions):
    when: Literal["init", "invoke"] = "invoke"


class CrashKernel(DelegateKernel):
    def __init__(self, when: str) -> None:
        self.when = when

    def init(self, subgraph: offload.Subgraph, partition: offload.Partition) -> None:
        if self.when == "init":
            os._exit(EXIT_STATUS)
        self.outputs = [subgraph.tensors[t] for t in partition.outputs]

    def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        os._exit(EXIT_STATUS)


class CrashDelegate(Delegate):
    name = "crasher"
    version = "0.0.1"
    Options = CrashOptions
    CAPABILITIES = Capabilities(
        ops=(OpCapability(op="ADD", max_inputs=2, broadcast=False, fused_activations=("NONE",)),),
        model_types={
            t: ModelTypeSupport(support="yes" if t == "float32" else "no", reason="float32 only")
            for t in ("float32", "float16", "dynamic_range", "int8", "qat")
        },
    )

    def create_kernel(self) -> CrashKernel:
        return CrashKernel(self.options.when)

"""The ``coreml`` delegate: its options, its availability, and the kernel that runs a partition."""

from __future__ import annotations

import logging
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field, PositiveInt

import offload
from offload import Availability, Capabilities, Delegate, DelegateKernel, DelegateOptions
from offload.errors import DelegateUnavailableError
from offload_coreml._support import CAPABILITIES, check_node

__all__ = ["CoreMLOptions", "CoreMLDelegate", "CoreMLKernel", "has_neural_engine"]

VERSION = "0.1.0"
log = logging.getLogger("offload_coreml")


class CoreMLOptions(DelegateOptions):
    """Options of the ``coreml`` delegate (LiteRT's TfLiteCoreMlDelegateOptions, and more).

    ``enabled_devices``: "neural_engine" (LiteRT's default) creates the delegate only on Macs
    with a Neural Engine; "all" on any Mac. ``coreml_version``: the oldest Core ML the programs
    must run on; ML Programs need Core ML 5, so 2-5 all mean iOS 15 / macOS 12, and 6, 7, 8
    mean iOS 16, 17, 18. ``compute_units`` and ``compute_precision`` go to ``ct.convert`` /
    ``MLModel``. ``cache_dir`` holds converted programs (default ``~/.cache/offload/coreml``);
    ``model_token`` names the model's cache entries; its weights are still hashed to guard them.
    """

    enabled_devices: Literal["neural_engine", "all"] = "neural_engine"
    coreml_version: int = Field(default=5, ge=2, le=8)
    min_nodes_per_partition: PositiveInt = 2
    compute_units: Literal["ALL", "CPU_ONLY", "CPU_AND_GPU", "CPU_AND_NE"] = "ALL"
    compute_precision: Literal["float16", "float32"] = "float16"
    cache_dir: str | None = None
    model_token: str | None = None


# The hardware Core ML computes on for each compute_units value, as CompiledModel names it:
# ALL and CPU_AND_NE place work on the Neural Engine where it can.
_KIND_OF_UNITS = {"ALL": "npu", "CPU_AND_NE": "npu", "CPU_AND_GPU": "gpu", "CPU_ONLY": "cpu"}


def has_neural_engine() -> bool:
    """Best effort: ask Core ML (macOS 14+) for its compute devices, else assume Apple silicon
    has one and Intel Macs do not."""
    try:
        from coremltools.models.compute_device import (
            MLComputeDevice,
            MLNeuralEngineComputeDevice,
        )

        devices = MLComputeDevice.get_all_compute_devices()
        return any(isinstance(d, MLNeuralEngineComputeDevice) for d in devices)
    except Exception:
        pass
    if platform.machine() == "arm64":
        return True
    try:  # an x86_64 Python under Rosetta on Apple silicon
        out = subprocess.run(
            ["sysctl", "-n", "sysctl.proc_translated"], capture_output=True, text=True, timeout=5
        )
        return out.stdout.strip() == "1"
    except Exception:
        return False


class CoreMLDelegate(Delegate):
    """Converts each partition to a Core ML ML Program and runs it with ``MLModel.predict``."""

    name = "coreml"
    version = VERSION
    Options = CoreMLOptions
    CAPABILITIES = CAPABILITIES

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        if (
            sys.platform == "darwin"
            and self.options.enabled_devices == "neural_engine"
            and not has_neural_engine()
        ):
            raise DelegateUnavailableError(
                "delegate 'coreml' is unavailable here: enabled_devices='neural_engine' but this "
                "Mac has no Neural Engine; pass enabled_devices='all' to use its CPU and GPU"
            )

    @property
    def capabilities(self) -> Capabilities:
        kind = _KIND_OF_UNITS[self.options.compute_units]
        return CAPABILITIES if kind == "npu" else CAPABILITIES.model_copy(update={"hardware": kind})

    @classmethod
    def options_for_hardware(cls, kind: str) -> dict[str, Any] | None:
        # The Neural Engine by default; its GPU when a program asks for GPU without NPU. Core ML
        # on the CPU alone is left out: the CPU engines are the faster way there.
        if kind == "npu":
            return {}
        if kind == "gpu":
            return {"compute_units": "CPU_AND_GPU", "enabled_devices": "all"}
        return None

    @classmethod
    def availability(cls) -> Availability:
        if sys.platform != "darwin":
            return Availability(
                False,
                f"Core ML runs only on macOS; this is {sys.platform} "
                "(export_coreml / `offload export-coreml` still convert models here)",
            )
        try:
            from coremltools.libcoremlpython import _MLModelProxy  # noqa: F401
        except Exception as exc:
            return Availability(
                False, f"coremltools cannot run predictions here ({type(exc).__name__}: {exc})"
            )
        return Availability(True)

    def check_node(self, node: offload.Node, subgraph: offload.Subgraph) -> str | None:
        return check_node(node, subgraph)

    def settings(self) -> dict[str, Any]:
        """What the converted program depends on besides the partition (cache key part)."""
        import coremltools

        o = self.options
        return {
            "plugin": VERSION,
            "coremltools": coremltools.__version__,
            "coreml_version": o.coreml_version,
            "compute_precision": o.compute_precision,
        }

    def create_kernel(self) -> CoreMLKernel:
        return CoreMLKernel(self)


class CoreMLKernel(DelegateKernel):
    """One partition: converted (or read from the cache) at init, run with MLModel.predict."""

    def __init__(self, delegate: CoreMLDelegate) -> None:
        self.delegate = delegate
        self.conversion_seconds = 0.0
        self.from_cache = False

    def init(self, subgraph: offload.Subgraph, partition: offload.Partition) -> None:
        from offload_coreml._cache import ProgramCache, partition_key
        from offload_coreml._convert import build_program, to_mlmodel

        o = self.delegate.options
        self.partition = partition
        self.subgraph = subgraph
        start = time.perf_counter()
        converted = build_program(subgraph, partition, o.coreml_version)
        self.converted = converted
        import coremltools as ct

        settings = self.delegate.settings()
        key = partition_key(subgraph, partition, settings, o.model_token)
        # The token names the entry, the content guards it (a reused token is rebuilt).
        content = partition_key(subgraph, partition, settings, None) if o.model_token else key

        def build(path: Any) -> None:
            to_mlmodel(
                converted.program, o.compute_precision, o.compute_units, o.coreml_version
            ).save(str(path))

        # Held by the kernel: a package that could not be cached lives as long as it.
        self.cache = ProgramCache(o.cache_dir)
        path, self.from_cache = self.cache.get_or_build(key, build, guard=content)
        self.model = ct.models.MLModel(
            str(path), compute_units=getattr(ct.ComputeUnit, o.compute_units)
        )
        self.conversion_seconds = time.perf_counter() - start
        self.input_names = dict(converted.inputs)
        log.info(
            "coreml partition %d: %d nodes %s in %.2f s",
            partition.index,
            len(partition.nodes),
            "loaded from the cache" if self.from_cache else "converted",
            self.conversion_seconds,
        )

    def prepare(self, input_shapes: Sequence[tuple[int, ...]]) -> None:
        """Programs are built for the model's static shapes; a resized input cannot run."""
        tensors = self.subgraph.tensors
        for t, shape in zip(self.partition.inputs, input_shapes):
            if t in self.input_names and tuple(shape) != tuple(tensors[t].shape):
                raise ValueError(
                    f"input tensor {t} was resized to {list(shape)}; the Core ML program was "
                    f"built for {list(tensors[t].shape)} (static shapes only)"
                )

    def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        feed = {
            self.input_names[t]: np.ascontiguousarray(x, dtype=np.float32)
            for t, x in zip(self.partition.inputs, inputs)
        }
        predicted = self.model.predict(feed)
        return [np.asarray(predicted[name], dtype=np.float32) for _, name in self.converted.outputs]

"""offload: run TensorFlow Lite / LiteRT models in Python, with accelerator delegates.

The public API is what ``__all__`` lists; everything in underscore modules is private.
"""

from offload import cache, compiled_model, errors, geometry, interpreter, quant
from offload._admission import check_engine_node
from offload._auto_cache import clear_auto_cache
from offload._capabilities import (
    Capabilities,
    DTypeName,
    HardwareKind,
    ModelTypeSupport,
    OpCapability,
)
from offload._compiled_model import CompiledModel
from offload._compiled_options import HardwareAccelerator
from offload._delegate import (
    Availability,
    Delegate,
    DelegateKernel,
    DelegateOptions,
    DevicePeak,
    DeviceProfile,
    KernelTiming,
)
from offload._export import (
    ExportedPartition,
    check_exportable,
    export_partition,
    partition_fingerprint,
)
from offload._graph import Model, ModelType, Node, OpOptions, Subgraph, Tensor
from offload._interpreter import Interpreter
from offload._loader import load_model
from offload._matrix import capability_matrix
from offload._partition import Partition
from offload._patch import LiteRTPatch, patch_litert
from offload._per_node import diff_per_node
from offload._per_node_result import NodeDiff, PerNodeDiff, TensorComparison
from offload._plan import Plan
from offload._plugins import list_delegates, list_plugins, load_delegate, reload_plugins
from offload._providers import DelegateFlag, DelegateProvider
from offload._signature_runner import SignatureRunner
from offload._sweep import SweepReport, SweepRow, SweepShard, sweep
from offload._tensor_buffer import TensorBuffer
from offload.hookspecs import hookimpl

__version__ = "0.1.0"

__all__ = [
    "Availability",
    "Capabilities",
    "CompiledModel",
    "Delegate",
    "DelegateFlag",
    "DelegateKernel",
    "DelegateOptions",
    "DelegateProvider",
    "DevicePeak",
    "DeviceProfile",
    "DTypeName",
    "ExportedPartition",
    "HardwareAccelerator",
    "HardwareKind",
    "Interpreter",
    "KernelTiming",
    "LiteRTPatch",
    "Model",
    "ModelType",
    "ModelTypeSupport",
    "Node",
    "NodeDiff",
    "OpCapability",
    "OpOptions",
    "Partition",
    "PerNodeDiff",
    "Plan",
    "SignatureRunner",
    "Subgraph",
    "SweepReport",
    "SweepRow",
    "SweepShard",
    "Tensor",
    "TensorBuffer",
    "TensorComparison",
    "cache",
    "capability_matrix",
    "check_engine_node",
    "check_exportable",
    "clear_auto_cache",
    "compiled_model",
    "diff_per_node",
    "errors",
    "export_partition",
    "geometry",
    "interpreter",
    "hookimpl",
    "list_delegates",
    "list_plugins",
    "load_delegate",
    "load_model",
    "partition_fingerprint",
    "patch_litert",
    "quant",
    "reload_plugins",
    "sweep",
]

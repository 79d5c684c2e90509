"""offload behind LiteRT 2.x's module: the names of ``ai_edge_litert.compiled_model``.

``from offload.compiled_model import CompiledModel, HardwareAccelerator`` stands where
``from ai_edge_litert.compiled_model import ...`` stood, with LiteRT 2.3's classes, parameters,
defaults and enum values: ``CompiledModel``, ``TensorBuffer``, ``HardwareAccelerator``,
``Options``, ``CpuOptions``, ``CpuKernelMode``, ``GpuOptions``, ``IntelOpenVinoOptions``,
``QualcommOptions``, ``Environment`` and ``EnvironmentOptions``. It is also what ``offload
run`` and :func:`offload.patch_litert` put behind that import.

Where offload differs from LiteRT, :data:`DIFFERENCES` says how, one entry per member.
"""

from __future__ import annotations

from offload._compiled_model import PLACEHOLDER_SIGNATURE, CompiledModel
from offload._compiled_options import (
    CpuKernelMode,
    CpuOptions,
    GpuOptions,
    HardwareAccelerator,
    IntelOpenVinoOptions,
    Options,
    QualcommOptions,
)
from offload._tensor_buffer import Environment, EnvironmentOptions, TensorBuffer

__all__ = [
    "DIFFERENCES",
    "PLACEHOLDER_SIGNATURE",
    "CompiledModel",
    "CpuKernelMode",
    "CpuOptions",
    "Environment",
    "EnvironmentOptions",
    "GpuOptions",
    "HardwareAccelerator",
    "IntelOpenVinoOptions",
    "Options",
    "QualcommOptions",
    "TensorBuffer",
]

# Where offload's CompiledModel API knowingly differs from LiteRT 2.3's, by member.
DIFFERENCES: dict[str, str] = {
    "CompiledModel.__init__": (
        "takes offload's compiled state, not a C++ pointer; models are made by from_file and "
        "from_buffer in both"
    ),
    "CompiledModel.from_file": (
        "compiling plans with the installed delegates of the kinds in hardware_accel and, "
        "where there are several, measures them once as delegates='auto' does "
        "($OFFLOAD_AUTO_BUDGET_S; remembered), so a first compile of a model takes longer"
    ),
    "CompiledModel.resize_input_tensor_by_name": (
        "an unknown signature or input is a SignatureError (a RuntimeError); LiteRT raises "
        "ValueError"
    ),
    "CompiledModel.run_by_index": (
        "a buffer whose dtype or element count does not fit its tensor is a TensorTypeError or "
        "TensorShapeError (ValueErrors) naming the tensor; LiteRT raises RuntimeError (Failed "
        "to invoke the compiled model)"
    ),
    "CompiledModel.run_by_name": (
        "the maps must name exactly the signature's inputs and outputs (SignatureError); LiteRT "
        "ignores unknown input and output names and runs with an input left out (that input "
        "keeps what it held), refusing only a missing output. Buffers are checked as in "
        "run_by_index"
    ),
    "TensorBuffer.create_from_host_memory": (
        "always shares the array's memory; LiteRT copies an array that is not 64-byte aligned "
        "(numpy's are often 16), so later writes to the array reach its buffer only sometimes. "
        "Takes int64 and int16 (in write and read too), which LiteRT's TensorBuffer refuses"
    ),
    "TensorBuffer.write": (
        "takes exactly the buffer's dtype and element count (TensorTypeError, "
        "TensorShapeError); LiteRT writes a shorter array or another dtype's bytes"
    ),
    "TensorBuffer.read": (
        "output_dtype must be the buffer's dtype (TensorTypeError); LiteRT reinterprets the "
        "bytes. A count over the buffer's size is a TensorShapeError (LiteRT: RuntimeError)"
    ),
    "TensorBuffer.capsule": "the numpy array that holds the data, not a PyCapsule",
    "Environment": (
        "holds its options only: offload loads no runtime, compiler plugin or dispatch library"
    ),
}

"""Every exception offload raises on purpose, in one place.

Each message says what was expected, what was found and, where it helps, what to do.
All of them derive from :class:`OffloadError`, so ``except offload.errors.OffloadError``
catches everything the library raises deliberately.
"""

from __future__ import annotations

__all__ = [
    "OffloadError",
    "ModelLoadError",
    "InvalidGraphError",
    "UnsupportedModelError",
    "UnsupportedOpError",
    "OpExecutionError",
    "TensorIndexError",
    "TensorShapeError",
    "TensorTypeError",
    "ReadOnlyBufferError",
    "MemoryBudgetError",
    "InterpreterStateError",
    "PluginError",
    "PluginImportError",
    "DelegateUnavailableError",
    "DelegateOptionsError",
    "CapabilityDeclarationError",
    "PluginHookError",
    "PartitionError",
    "PartitionExportError",
    "CpuFallbackError",
    "DelegateError",
    "ModelBuildError",
    "CacheError",
    "UsageError",
    "PartitionCostWarning",
    "IncompatibleOptionError",
    "StandInError",
    "StandInImportError",
    "SubgraphIndexError",
    "SignatureError",
    "InvalidSignatureError",
    "NoTensorValueError",
]


class OffloadError(Exception):
    """Base class of every error offload raises deliberately."""


class ModelLoadError(OffloadError, ValueError):
    """The bytes are not a readable .tflite flatbuffer (truncated, corrupted, wrong file)."""


class InvalidGraphError(ModelLoadError):
    """The flatbuffer reads, but a subgraph breaks the format's rules: its operators are not
    in execution order (a node reads a tensor that only it or a later node writes), or one
    tensor is written twice. The message names the nodes and tensors."""


class UnsupportedModelError(OffloadError, ValueError):
    """A valid .tflite model that offload cannot run (e.g. external buffers over 2 GiB)."""


class UnsupportedOpError(OffloadError, NotImplementedError):
    """A node uses an op (builtin, version or custom) for which no kernel exists."""


class OpExecutionError(OffloadError, RuntimeError):
    """A kernel failed; the message carries op, version, node index, input shapes and dtypes."""


class TensorIndexError(OffloadError, IndexError, ValueError):
    """A tensor index is outside the subgraph's tensor table, or names a tensor the call does
    not take (``set_tensor`` on a tensor that is neither an input nor a variable). A ValueError,
    as LiteRT's "Invalid tensor index" is, and still an IndexError for code written before."""


class SubgraphIndexError(OffloadError, ValueError):
    """A subgraph index is outside the model's subgraphs (a ValueError, as in LiteRT)."""


class SignatureError(OffloadError, RuntimeError):
    """A CompiledModel call named a signature, input or output the model does not have, or
    gave buffers that do not match the signature's (a RuntimeError, as LiteRT's raises)."""


class InvalidSignatureError(ModelLoadError, SignatureError):
    """A signature in the model lies: its subgraph or one of its tensor indices is out of
    range, or it names as an input a tensor that an op writes (the value given would be
    overwritten by that op). The message names the signature, the key or subgraph, and the
    index found with the range allowed, or the op.

    Raised where the signature is first used (``get_signature_runner``, ``SignatureRunner``,
    ``CompiledModel.from_file`` / ``from_buffer``), not at load: LiteRT's Interpreter loads
    such a model and runs its main subgraph. A ValueError, as LiteRT's Interpreter raises for
    these, and a :class:`SignatureError` (a RuntimeError), as LiteRT's CompiledModel refuses
    the model."""


class TensorShapeError(OffloadError, ValueError):
    """A tensor was given (or resized to) a shape that does not fit."""


class TensorTypeError(OffloadError, ValueError):
    """A tensor was given a value of the wrong dtype, or a model gives a node a tensor type
    its op does not take."""


class ReadOnlyBufferError(OffloadError, ValueError):
    """A TensorBuffer over a read-only array was to be written: by ``write``, or by a run that
    writes it (an output buffer, a state input). Refused before anything is written, the run
    before any node runs; the message names the buffer. A ValueError, as numpy's "assignment
    destination is read-only" is. Reading such a buffer, or running with it as an input the
    model only reads, is allowed, as LiteRT allows it."""


class MemoryBudgetError(OffloadError, MemoryError):
    """A tensor would need more bytes than the interpreter's ``max_tensor_bytes`` allows."""


class InterpreterStateError(OffloadError, RuntimeError):
    """A method was called in the wrong order (e.g. invoke before allocate_tensors).

    Reading a tensor that has no value raises the subclass :class:`NoTensorValueError`, which
    is also a ValueError, as LiteRT's error for that case is; ``except InterpreterStateError``
    still catches it."""


class NoTensorValueError(InterpreterStateError, ValueError):
    """A tensor was read that has no value: before ``allocate_tensors``, another subgraph's
    tensor before its signature runner ran, an intermediate freed after its last use (a
    signature output among them), a sparse constant (no dense value). A ValueError, as
    LiteRT's "Tensor data is null" is; the message says what gives the tensor a value."""


class PluginError(OffloadError):
    """Base class for plugin discovery and loading problems."""


class PluginImportError(PluginError, ImportError):
    """A plugin registered in ``offload.delegates`` failed to import."""


class DelegateUnavailableError(PluginError, RuntimeError):
    """A delegate that was asked for by name is installed but cannot run here (with the reason)."""


class DelegateOptionsError(PluginError, ValueError):
    """Delegate options were rejected; the message names the delegate and the option."""


class CapabilityDeclarationError(PluginError, ValueError):
    """A delegate declared capabilities (or command-line flags) that cannot be valid; the
    message names the plugin where it is known, the op and the field."""


class PluginHookError(PluginError, TypeError):
    """A plugin's hooks do not match :mod:`offload.hookspecs`: a function named ``offload_*``
    without ``@offload.hookimpl``, a hook name no spec has, or an argument the spec lacks. The
    message names the plugin, the hook and the argument."""


class PartitionError(OffloadError, ValueError):
    """Partitioning options or inputs were invalid."""


class PartitionExportError(PartitionError):
    """A partition cannot be written as a standalone .tflite model (``export_partition``): a
    node the format cannot carry (a CUSTOM operator without its custom code, options the
    installed schema does not know), state or a resource tensor shared across the partition's
    boundary. The message names the node or tensor and says what to do; per node, the same
    reason comes from ``offload.check_exportable`` for ``check_node`` to decline with."""


class CpuFallbackError(OffloadError, RuntimeError):
    """Strict mode (``allow_cpu_fallback=False``) found nodes that no delegate took."""


class DelegateError(OffloadError, RuntimeError):
    """A delegate kernel failed while initialising, preparing or invoking its partition."""


class ModelBuildError(OffloadError, ValueError):
    """The model builder was given an inconsistent graph."""


class CacheError(OffloadError, OSError):
    """A cache directory (or its key file) was refused: a symbolic link, not a directory, owned
    by another user, writable by others; the message names the path and what to do."""


class UsageError(OffloadError, ValueError):
    """A tool (the command line, ``diff_per_node``) was asked for something it cannot do with
    what it was given or what is installed: a missing file, a bad value, an optional dependency
    such as ai-edge-litert not installed. The command line exits 2 on it."""


class IncompatibleOptionError(OffloadError, ValueError):
    """A LiteRT argument or feature that offload cannot honour was asked for (custom op
    registerers, for one). The message names it and says what to do instead; every such
    difference from LiteRT is listed in ``offload.interpreter.DIFFERENCES``."""


class StandInError(OffloadError, AttributeError):
    """A program run on offload (``offload run``, ``offload.patch_litert``) used a part of a
    stand-in module (``tensorflow``, ``tflite_runtime``) that offload does not provide: the
    ``tensorflow`` stand-in has ``tf.lite``'s interpreter pieces only. The message names the
    attribute and says how to run the program with the real package."""


class StandInImportError(OffloadError, ModuleNotFoundError):
    """A program run on offload imported a submodule of a stand-in package that offload does
    not provide (``import tensorflow.keras`` under the ``tensorflow`` stand-in)."""


class PartitionCostWarning(UserWarning):
    """A plan for delegates the program named is fragmented: many small partitions, or
    boundary copies larger than the work delegated (see ``offload._plan_cost``). Given once per
    plan, with the figures, the ops that split the graph and the command that shows the plan;
    ``delegates="auto"`` rejects such plans instead of warning."""

"""LiteRT's Interpreter arguments as offload takes them, and every difference, in one place.

offload's Interpreter has LiteRT 2.3's methods, parameter names and defaults (a test compares
them with the installed ``ai_edge_litert`` by introspection). What offload cannot do as LiteRT
does is written in :data:`DIFFERENCES`, keyed the way the parity test names a member, and
published as ``offload.interpreter.DIFFERENCES``; nothing else is allowed to differ.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "DIFFERENCES",
    "LITERT_MESSAGES",
    "LITERT_OPTIONS",
    "OpResolverType",
    "check_litert_options",
    "check_num_threads",
    "compress_zero_points",
    "litert_message",
]


@enum.unique
class OpResolverType(enum.Enum):
    """LiteRT's op resolver choice, with its names and values (``ai_edge_litert.interpreter``).

    offload has one set of CPU kernels, the numpy reference, which follows LiteRT's builtin
    kernels; what each choice does to the delegates applied by default is in
    :data:`DIFFERENCES`. A LiteRT ``OpResolverType`` member is accepted too (matched by name).
    """

    AUTO = 0
    BUILTIN = 1
    BUILTIN_REF = 2
    BUILTIN_WITHOUT_DEFAULT_DELEGATES = 3


# LiteRT 2.3's own text for each misuse that both raise, by case. offload raises the same class
# (or a subclass) with this text first, then its own detail in parentheses, so that a program
# or test matching LiteRT's message still matches; tests/test_litert_messages.py provokes each
# case in the installed LiteRT and checks the text is still LiteRT's.
LITERT_MESSAGES: dict[str, str] = {
    "no_model": "`model_path` or `model_content` must be specified.",
    "both_models": "Can't both provide `model_path` and `model_content`",
    "open_failed": "Could not open '{path}'.",
    "not_flatbuffer": "The model is not a valid Flatbuffer buffer",
    "threads_type": "type of num_threads should be int",
    "threads_value": "num_threads should >= 1",
    "resolver": "Unrecognized passed in op resolver type: {value}",
    "not_ready": "Invoke called on model that is not ready.",
    "view_held": (
        "There is at least 1 reference to internal data in the interpreter in the form of a "
        "numpy array or slice. Be sure to only hold the function returned from tensor() if you "
        "are using raw data access."
    ),
    "tensor_index": "Invalid tensor index {index} exceeds max tensor index {count}",
    "node_index": "Invalid node index",
    "subgraph_index": (
        "subgraph_index is out of range: {index} for the model, which has {count} subgraphs."
    ),
    "no_tensor_data": "Tensor data is null. Run allocate_tensors() first",
    "set_unallocated": (
        "Cannot set tensor: Tensor is unallocated. Try calling allocate_tensors() first"
    ),
    "set_dtype": (
        "Cannot set tensor: Got value of type {found} but expected type {expected} for input "
        "{index}, name: {name} "
    ),
    "set_rank": (
        "Cannot set tensor: Dimension mismatch. Got {found} but expected {expected} for input "
        "{index}."
    ),
    "set_dim": (
        "Cannot set tensor: Dimension mismatch. Got {found} but expected {expected} for "
        "dimension {dim} of input {index}."
    ),
    "not_array": "Passed in value type is not a numpy array, got type {type}.",
    "signature_key": 'Invalid signature_key provided: "{key}".',
    "signature_key_none": (
        "SignatureDef signature_key is None and model has {count} Signatures. None is only "
        "allowed when the model has 1 SignatureDef"
    ),
    "signature_inputs": (
        "Invalid number of inputs provided for running a SignatureDef, expected {expected} vs "
        "provided {found}"
    ),
    "runner_interpreter": "None interpreter provided.",
    "runner_key": "None signature_key provided.",
    "delegate_load": "Failed to load delegate from",
    "registerer_symbol": "Looking up symbol '{name}' failed",
    "registerer_library": "Loading library '{library}' failed with error '{error}'",
}


def litert_message(case: str, detail: str = "", **fields: Any) -> str:
    """LiteRT's text for ``case`` (see :data:`LITERT_MESSAGES`) with offload's ``detail``."""
    text = LITERT_MESSAGES[case].format(**fields)
    return f"{text.rstrip()} ({detail})" if detail else text


def check_num_threads(num_threads: Any) -> int | None:
    """``num_threads`` checked as LiteRT 2.3 checks it: None, or an int of at least 1 (a bool
    passes, as it does for LiteRT's ``isinstance(num_threads, int)``)."""
    if num_threads is None:
        return None
    if not isinstance(num_threads, int):
        raise ValueError(
            litert_message("threads_type", f"found {type(num_threads).__name__} {num_threads!r}")
        )
    if num_threads < 1:
        raise ValueError(litert_message("threads_value", f"found {num_threads}"))
    return int(num_threads)


# LiteRT 2.3's Interpreter keyword arguments that offload's Interpreter takes through
# ``**litert_options``, with LiteRT's defaults. Any other unknown keyword is a TypeError, as it
# is for LiteRT, instead of being silently dropped.
LITERT_OPTIONS: dict[str, Any] = {
    "experimental_op_resolver_type": OpResolverType.AUTO,
    "experimental_disable_delegate_clustering": False,
    "experimental_default_delegate_latest_features": False,
    "experimental_compress_quantization_zero_points": False,
    "experimental_disable_delegate_node_fusion": False,
    "experimental_force_delegate_node_profiling": False,
}

DIFFERENCES: dict[str, str] = {
    "Interpreter.__init__(positional arguments)": (
        "LiteRT's eleven parameters are positional in LiteRT's order; offload's own "
        "(delegates, allow_cpu_fallback, profile, max_tensor_bytes, auto_*) are keyword-only. "
        "A str, list, tuple or None fifth positional argument is taken as offload 0.1's "
        "delegates, with a DeprecationWarning, until 0.3.0."
    ),
    "Interpreter.__init__(experimental_delegates)": (
        "offload delegates (offload.load_delegate / offload.interpreter.load_delegate) rather "
        "than LiteRT Delegate objects. load_delegate('lib.so', options) makes the C delegate "
        "once, as LiteRT's does, and every interpreter and partition it is passed to shares "
        "that instance; LiteRT applies it to the partitions the litert delegate runs when "
        "allocate_tensors() plans them, where LiteRT applies it at construction."
    ),
    "Interpreter.__init__(num_threads)": (
        "accepted; the CPU reference runs on numpy's own threads; the delegates offload "
        "chooses itself (the default, delegates='auto') get it as their num_threads option "
        "where they have one (litert, openvino), and a delegate named or passed in keeps "
        "the thread count of its own options."
    ),
    "Interpreter.__init__(experimental_op_resolver_type)": (
        "offload has one set of CPU kernels, the numpy reference, which follows LiteRT's "
        "builtin kernels; the choice says whether offload's default delegates apply, as "
        "LiteRT's says whether XNNPACK does: AUTO and BUILTIN apply them, "
        "BUILTIN_WITHOUT_DEFAULT_DELEGATES and BUILTIN_REF run the CPU reference alone unless "
        "delegates are named."
    ),
    "Interpreter.__init__(experimental_disable_delegate_clustering)": (
        "accepted and has no effect: offload's partitioner does not reorder nodes to cluster "
        "a delegate's nodes, so there is nothing to disable."
    ),
    "Interpreter.__init__(experimental_default_delegate_latest_features)": (
        "accepted and has no effect: it selects XNNPACK features, and offload has no XNNPACK "
        "of its own (the litert delegate runs LiteRT's)."
    ),
    "Interpreter.__init__(experimental_disable_delegate_node_fusion)": (
        "accepted and has no effect: offload delegates fuse inside their own partitions, "
        "and each delegate's options say whether."
    ),
    "Interpreter.__init__(experimental_force_delegate_node_profiling)": (
        "accepted and has no effect; offload profiles with Interpreter(profile=True) per step "
        "and set_delegate_profiling() per delegate kernel."
    ),
    "Interpreter.tensor": (
        "as in LiteRT, the array is live and allocate_tensors(), invoke() and "
        "resize_tensor_input() refuse to run while one (or a slice of one) is held; an "
        "intermediate is only kept with experimental_preserve_all_tensors=True; a string "
        "tensor has no raw view and raises TensorTypeError (LiteRT's crashes the process)."
    ),
    "Interpreter.set_tensor": (
        "a tensor that is not an input or a variable is refused (TensorIndexError), where "
        "LiteRT writes it and the next invoke overwrites it; a 0-d numpy str array for a "
        "string tensor is stored UTF-8 encoded, where LiteRT stores its raw UCS-4 bytes."
    ),
    "Interpreter.resize_tensor_input": (
        "a change of rank is refused at the call (TensorShapeError), where LiteRT accepts it "
        "and its ops reject it at allocate_tensors(); an index that is not an input is a "
        "TensorIndexError (a ValueError) where LiteRT raises RuntimeError."
    ),
    "Interpreter.get_tensor_details": (
        "every tensor of the subgraph is listed; LiteRT skips tensors it holds no details for "
        "(unnamed temporaries), which a .tflite file does not have."
    ),
    "InterpreterWithCustomOps": (
        "custom_op_registerers are C++ functions for LiteRT's op resolver, which offload cannot "
        "call: passing any raises IncompatibleOptionError; without them it is an Interpreter."
    ),
    "Delegate": (
        "offload.Delegate, the delegate base class that load_delegate returns. For a C "
        "delegate library, load_delegate('lib.so', options) returns the litert delegate "
        "holding one instance of the library's delegate, with LiteRT's Delegate surface "
        "(_library, _delegate_ptr, _get_native_delegate_pointer()), so LiteRT's own "
        "Interpreter accepts it too. Options are parsed once, at load_delegate; a refusal is "
        "a ValueError (DelegateOptionsError) starting 'Failed to load delegate from'. The "
        "instance is destroyed with tflite_plugin_destroy_delegate when the delegate object "
        "and the last interpreter using it are gone."
    ),
}


def check_litert_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """LiteRT's keyword arguments with their defaults filled in; an unknown name raises
    TypeError as a Python call would, and a flag that is not a bool raises TypeError too."""
    unknown = sorted(set(options) - set(LITERT_OPTIONS))
    if unknown:
        raise TypeError(
            f"Interpreter() got an unexpected keyword argument {unknown[0]!r}; LiteRT's keyword "
            f"arguments are {sorted(LITERT_OPTIONS)}, offload's own are listed in "
            "help(offload.Interpreter)"
        )
    merged = {**LITERT_OPTIONS, **options}
    for name, value in merged.items():
        if isinstance(LITERT_OPTIONS[name], bool) and not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"Interpreter(): {name} expects a bool, found {value!r}")
    merged["experimental_op_resolver_type"] = _resolver_type(
        merged["experimental_op_resolver_type"]
    )
    return merged


def _resolver_type(resolver: Any) -> OpResolverType:
    """An OpResolverType member, offload's or LiteRT's (matched by name); anything else,
    its value included, is LiteRT's ValueError, as LiteRT compares members only."""
    names = OpResolverType.__members__
    if isinstance(resolver, enum.Enum) and resolver.name in names:
        return names[resolver.name]
    raise ValueError(
        litert_message(
            "resolver",
            f"expected an OpResolverType member ({', '.join(names)})",
            value=resolver,
        )
    )


def compress_zero_points(details: dict[str, Any]) -> dict[str, Any]:
    """A tensor detail dict as LiteRT gives it with experimental_compress_quantization_zero_points:
    per-channel zero points that are all equal (always, for int8 weights) are given once."""
    params = details["quantization_parameters"]
    zero_points = params["zero_points"]
    if zero_points.size > 1 and bool(np.all(zero_points == zero_points[0])):
        params = {**params, "zero_points": zero_points[:1].copy()}
        details = {**details, "quantization_parameters": params}
    return details

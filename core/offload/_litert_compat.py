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
    "LITERT_OPTIONS",
    "OpResolverType",
    "check_litert_options",
    "compress_zero_points",
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
        "model_path, model_content, experimental_delegates and num_threads are positional as "
        "in LiteRT; the arguments after them are keyword-only (offload's fifth positional "
        "argument is delegates). Every LiteRT keyword is accepted under its own name."
    ),
    "Interpreter.__init__(experimental_delegates)": (
        "offload delegates (offload.load_delegate / offload.interpreter.load_delegate) rather "
        "than LiteRT Delegate objects; a LiteRT C delegate library is loaded with "
        "load_delegate('lib.so') and applied by LiteRT through the litert delegate."
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
        "the returned function gives the live array of the tensor, as LiteRT's does; offload "
        "does not refuse invoke() while such a view is held (LiteRT raises RuntimeError), and "
        "an intermediate is only kept with experimental_preserve_all_tensors=True."
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
        "offload.Delegate, the delegate base class that load_delegate returns, rather than "
        "LiteRT's wrapper of a C delegate library; load_delegate('lib.so') still loads a "
        "library, applied by LiteRT through the litert delegate."
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
    resolver = merged["experimental_op_resolver_type"]
    names = OpResolverType.__members__
    if getattr(resolver, "name", None) not in names:
        raise TypeError(
            "Interpreter(): experimental_op_resolver_type expects an OpResolverType "
            f"({sorted(names)}), found {resolver!r}"
        )
    merged["experimental_op_resolver_type"] = names[resolver.name]
    return merged


def compress_zero_points(details: dict[str, Any]) -> dict[str, Any]:
    """A tensor detail dict as LiteRT gives it with experimental_compress_quantization_zero_points:
    per-channel zero points that are all equal (always, for int8 weights) are given once."""
    params = details["quantization_parameters"]
    zero_points = params["zero_points"]
    if zero_points.size > 1 and bool(np.all(zero_points == zero_points[0])):
        params = {**params, "zero_points": zero_points[:1].copy()}
        details = {**details, "quantization_parameters": params}
    return details

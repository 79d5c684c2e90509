"""offload's litert delegate: each partition runs in LiteRT itself.

A partition is exported as a standalone .tflite (``offload.export_partition``) and run by
LiteRT's Interpreter with XNNPACK (as LiteRT users run it) or its builtin kernels (bit-exact
with offload's CPU reference), by its CompiledModel on the GPU accelerator, or with a LiteRT C
delegate library (``.so``) applied by LiteRT::

    offload.Interpreter(model_path="model.tflite", delegates=["litert"])
    offload.load_delegate("litert", {"kernels": "builtin", "num_threads": 2})
    offload.load_delegate("libvendor_delegate.so", {"option": "value"})  # comes here

The public face is the delegate class and its options; the rest is private.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import offload
from offload_litert._delegate import LiteRTDelegate, LiteRTOptions, __version__, capabilities

__all__ = ["LiteRTDelegate", "LiteRTOptions", "__version__", "capabilities"]


@offload.hookimpl
def offload_register_delegates() -> list[type[offload.Delegate]]:
    return [LiteRTDelegate]


@offload.hookimpl
def offload_native_library_delegate(library: str, options: Mapping[str, Any]) -> LiteRTDelegate:
    # One C delegate instance, made now (LiteRT's load_delegate): see external_delegate_path.
    return LiteRTDelegate(
        {"external_delegate_path": library, "external_delegate_options": dict(options)}
    )


@offload.hookimpl
def offload_delegate_providers() -> list[offload.DelegateProvider]:
    flag = offload.DelegateFlag
    return [
        offload.DelegateProvider(
            delegate="litert",
            enable_flag="--use_litert",
            help="run supported nodes in LiteRT itself (the litert delegate)",
            flag_prefix="--litert_",
            flags=(
                flag(
                    flag="--litert_num_threads",
                    option="num_threads",
                    type="int",
                    help="LiteRT's threads per partition (default 1)",
                ),
                flag(
                    flag="--litert_kernels",
                    option="kernels",
                    help="xnnpack (LiteRT's default) or builtin (bit-exact with the reference)",
                ),
                flag(
                    flag="--litert_accelerator",
                    option="accelerator",
                    help="cpu (LiteRT's Interpreter) or gpu (its CompiledModel GPU accelerator)",
                ),
                flag(
                    flag="--litert_precision_loss_allowed",
                    option="precision_loss_allowed",
                    type="bool",
                    help="with --litert_accelerator gpu, let LiteRT compute in float16",
                ),
                flag(
                    flag="--litert_external_delegate_path",
                    option="external_delegate_path",
                    help="a LiteRT C delegate library (.so) LiteRT applies to each partition",
                ),
                flag(
                    flag="--litert_external_delegate_options",
                    option="external_delegate_options",
                    help="that library's options, 'k1:v1;k2:v2'",
                ),
            ),
        )
    ]

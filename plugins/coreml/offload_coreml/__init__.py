"""The Core ML delegate: LiteRT's Core ML delegate, on ML Programs built with coremltools.

Each partition becomes one ML Program built with coremltools' MIL builder straight from
offload's graph (``_convert``); it runs with ``MLModel.predict`` on macOS (``_delegate``) and
can be exported as ``.mlpackage`` files anywhere (``_export``). ``_mil_eval`` evaluates the
programs with numpy, which is how they are checked on machines without Core ML.
"""

from __future__ import annotations

import argparse

import offload
from offload import Delegate
from offload_coreml._convert import ConversionError, ConvertedPartition, build_program
from offload_coreml._delegate import VERSION, CoreMLDelegate, CoreMLKernel, CoreMLOptions
from offload_coreml._export import ExportError, add_export_command, export_coreml

__version__ = VERSION

__all__ = [
    "ConversionError",
    "ConvertedPartition",
    "CoreMLDelegate",
    "CoreMLKernel",
    "CoreMLOptions",
    "ExportError",
    "build_program",
    "export_coreml",
]


@offload.hookimpl
def offload_register_delegates() -> list[type[Delegate]]:
    return [CoreMLDelegate]


@offload.hookimpl
def offload_delegate_providers() -> list[offload.DelegateProvider]:
    return [
        offload.DelegateProvider(
            delegate="coreml",
            enable_flag="--use_coreml",
            help="run supported nodes on the Core ML delegate (macOS)",
            flag_prefix="--coreml_",
            flags=(
                offload.DelegateFlag(flag="--coreml_version", option="coreml_version", type="int"),
                offload.DelegateFlag(
                    flag="--coreml_enabled_devices",
                    option="enabled_devices",
                    help="neural_engine (default) or all",
                ),
                offload.DelegateFlag(
                    flag="--coreml_compute_units",
                    option="compute_units",
                    help="ALL, CPU_ONLY, CPU_AND_GPU or CPU_AND_NE",
                ),
                offload.DelegateFlag(
                    flag="--coreml_compute_precision",
                    option="compute_precision",
                    help="float16 or float32",
                ),
            ),
        )
    ]


@offload.hookimpl
def offload_add_commands(subparsers: argparse._SubParsersAction) -> None:
    add_export_command(subparsers)

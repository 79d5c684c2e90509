"""offload's openvino delegate: each partition runs in OpenVINO.

A partition is exported as a standalone .tflite (``offload.export_partition``), converted by
OpenVINO's TensorFlow Lite frontend and compiled for an Intel CPU, GPU or NPU (or OpenVINO's
AUTO choice); compiled models are kept in offload's cache, so a second start imports them::

    offload.Interpreter(model_path="model.tflite", delegates=["openvino"])
    offload.load_delegate("openvino", {"device": "GPU", "num_threads": 0})

The public face is the delegate class and its options; the rest is private.
"""

from __future__ import annotations

import offload
from offload_openvino._delegate import (
    OpenVINODelegate,
    OpenVINOOptions,
    __version__,
    capabilities,
)

__all__ = ["OpenVINODelegate", "OpenVINOOptions", "__version__", "capabilities"]


@offload.hookimpl
def offload_register_delegates() -> list[type[offload.Delegate]]:
    return [OpenVINODelegate]


@offload.hookimpl
def offload_delegate_providers() -> list[offload.DelegateProvider]:
    flag = offload.DelegateFlag
    return [
        offload.DelegateProvider(
            delegate="openvino",
            enable_flag="--use_openvino",
            help="run supported nodes in OpenVINO (the openvino delegate)",
            flag_prefix="--openvino_",
            flags=(
                flag(
                    flag="--openvino_device",
                    option="device",
                    help="CPU (default), GPU, NPU, AUTO, or a device OpenVINO lists",
                ),
                flag(
                    flag="--openvino_num_threads",
                    option="num_threads",
                    type="int",
                    help="OpenVINO's inference threads (default 1; 0: OpenVINO's choice)",
                ),
                flag(
                    flag="--openvino_performance_hint",
                    option="performance_hint",
                    help="LATENCY or THROUGHPUT",
                ),
                flag(
                    flag="--openvino_inference_precision",
                    option="inference_precision",
                    help="f32 (default), or bf16 / f16 with --openvino_precision_loss_allowed",
                ),
                flag(
                    flag="--openvino_precision_loss_allowed",
                    option="precision_loss_allowed",
                    type="bool",
                    help="allow 16-bit inference (the device's default precision if none named)",
                ),
                flag(
                    flag="--openvino_dynamic_range",
                    option="dynamic_range",
                    help="refuse (default) or float: dynamic-range models in float",
                ),
                flag(
                    flag="--openvino_cache_dir",
                    option="cache_dir",
                    help="compiled-model cache ('' for none; default under ~/.cache/offload)",
                ),
                flag(
                    flag="--openvino_cpu_pinning",
                    option="cpu_pinning",
                    type="bool",
                    help="pin OpenVINO's CPU threads to cores (OpenVINO's default; off here)",
                ),
            ),
        )
    ]

"""offload's GPU delegate: LiteRT's GPU op set as OpenCL kernels, through pyopencl.

Install it next to offload and ask for it by name::

    offload.Interpreter(model_path="model.tflite", delegates=["gpu_opencl"])

The public face is the delegate class, its options and the two errors; the rest is private.
"""

from __future__ import annotations

import offload
from offload_gpu_opencl._delegate import (
    GpuOpenCLDelegate,
    GpuOpenCLOptions,
    __version__,
    capabilities,
)
from offload_gpu_opencl._errors import GpuOpenCLError, KernelBuildError, status_name

__all__ = [
    "GpuOpenCLDelegate",
    "GpuOpenCLError",
    "GpuOpenCLOptions",
    "KernelBuildError",
    "__version__",
    "capabilities",
    "status_name",
]


@offload.hookimpl
def offload_register_delegates() -> list[type[offload.Delegate]]:
    return [GpuOpenCLDelegate]


@offload.hookimpl
def offload_delegate_providers() -> list[offload.DelegateProvider]:
    flag = offload.DelegateFlag
    return [
        offload.DelegateProvider(
            delegate="gpu_opencl",
            enable_flag="--use_gpu",
            help="run supported nodes on the OpenCL GPU delegate (gpu_opencl)",
            flag_prefix="--gpu_",
            flags=(
                flag(
                    flag="--gpu_precision_loss_allowed",
                    option="precision_loss_allowed",
                    type="bool",
                    help="store tensors as half (compute in half with cl_khr_fp16)",
                ),
                flag(
                    flag="--gpu_enable_quant",
                    option="enable_quant",
                    type="bool",
                    help="run quantized models through the float view (default true)",
                ),
                flag(
                    flag="--gpu_serialization_dir",
                    option="serialization_dir",
                    help="directory caching compiled programs and transformed weights",
                ),
                flag(
                    flag="--gpu_model_token",
                    option="model_token",
                    help="cache key naming the model (default: its fingerprint)",
                ),
                flag(
                    flag="--gpu_platform",
                    option="platform",
                    help="OpenCL platform: index or name substring",
                ),
                flag(
                    flag="--gpu_device",
                    option="device",
                    help="OpenCL device: index or name substring",
                ),
                flag(
                    flag="--gpu_kernel_family",
                    option="kernel_family",
                    help="CONV_2D/FULLY_CONNECTED kernels: auto (by device class), cpu, gpu",
                ),
                flag(
                    flag="--gpu_autotune",
                    option="autotune",
                    type="bool",
                    help="time tile sizes per product at init (default: on for GPUs)",
                ),
                flag(
                    flag="--gpu_flush_every",
                    option="flush_every",
                    type="int",
                    help="clFlush every N launches, 0 never (default: 24 on Mali, else 0)",
                ),
                flag(
                    flag="--gpu_enqueue",
                    option="enqueue",
                    help="how launches are enqueued: auto, command_buffer, direct, pyopencl",
                ),
                flag(
                    flag="--gpu_fuse_gates",
                    option="fuse_gates",
                    type="bool",
                    help="GPU family: run a squeeze-excite MUL inside the 1x1 conv that reads it",
                ),
                flag(
                    flag="--gpu_fuse_depthwise",
                    option="fuse_depthwise",
                    type="bool",
                    help=(
                        "GPU family: run a depthwise conv inside the 1x1 conv that reads it "
                        "(default: where the autotuner times the fused products)"
                    ),
                ),
            ),
        )
    ]

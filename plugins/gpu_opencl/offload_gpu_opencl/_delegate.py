"""The gpu_opencl delegate: options, declared capabilities and per-node checks.

What each op supports lives with the op (_ops); this module puts the declarations together
and asks the op's spec about each node.
"""

from __future__ import annotations

from typing import Literal

from pydantic import NonNegativeInt

import offload
from offload import Capabilities, Delegate, DelegateOptions, ModelTypeSupport
from offload_gpu_opencl._device import open_device, probe
from offload_gpu_opencl._kernel import GpuKernel
from offload_gpu_opencl._ops import SPECS, capabilities_ops
from offload_gpu_opencl._replay import EnqueueMode

__all__ = ["GpuOpenCLDelegate", "GpuOpenCLOptions", "capabilities"]

__version__ = "0.1.0"


def capabilities(enable_quant: bool) -> Capabilities:
    """The declaration for quantization on (default) or off."""
    view = "runs through a float view: constants dequantized once at init, 8-bit boundary "
    view += "tensors converted on the host each invoke"
    off = ModelTypeSupport(support="no", reason="quantized models need enable_quant=True")
    return Capabilities(
        ops=capabilities_ops(enable_quant),
        model_types={
            "float32": ModelTypeSupport(support="yes"),
            "float16": ModelTypeSupport(
                support="yes", reason="float16 weights arrive folded to float32 by the core"
            ),
            "dynamic_range": ModelTypeSupport(support="yes", reason=view) if enable_quant else off,
            "int8": ModelTypeSupport(support="yes", reason=view) if enable_quant else off,
            "qat": ModelTypeSupport(support="yes", reason=view) if enable_quant else off,
        },
        precisions=("float32", "float16"),
        # A GPU kernel family by design; on PoCL's CPU device it still answers for "gpu", as
        # LiteRT's GPU accelerator does wherever its OpenCL or WebGPU backend starts.
        hardware="gpu",
        expected_speedup=1.5,  # measured 1.5x-3.3x vs the CPU reference on PoCL (README)
    )


_CAPS = {True: capabilities(True), False: capabilities(False)}


class GpuOpenCLOptions(DelegateOptions):
    """Options of the gpu_opencl delegate (LiteRT's GPU delegate options, plus device choice).

    ``precision_loss_allowed``: store tensors as half (and compute in half where the device has
    cl_khr_fp16). ``enable_quant``: run quantized models through the float view.
    ``serialization_dir`` / ``model_token``: cache compiled programs and transformed weights.
    ``platform`` / ``device``: an index or a case-insensitive name substring.
    ``kernel_family``: the CONV_2D / FULLY_CONNECTED kernels: ``"cpu"`` register-blocked (shaped
    for PoCL's CPU driver), ``"gpu"`` local-memory tiled GEMM with split-K (shaped for GPUs),
    ``"auto"`` (default) the one for the device's class. ``autotune``: time a few tile sizes and
    split-K factors per product at init and keep the fastest (kept in the serialization cache);
    ``None`` (default): on for GPUs, off for CPU devices, which take a fixed rule.
    ``flush_every``: submit the queued launches to the device (``clFlush``) after the first
    launch and then after every ``flush_every``-th, for drivers that hold commands until a
    flush, so that the device runs while the host is still enqueuing; ``0``: only the invoke's
    one wait submits them. ``None`` (default): 24 on ARM Mali GPUs, as LiteRT's GPU delegate
    does, else 0.
    ``enqueue``: how an invoke's launches reach the driver. ``"command_buffer"``: recorded once
    at init with ``cl_khr_command_buffer`` and enqueued as one command per invoke (init fails
    where the driver cannot); ``"direct"``: one call of the OpenCL library per launch, its
    arguments made at init, no event; ``"pyopencl"``: one ``pyopencl.enqueue_nd_range_kernel``
    per launch. ``"auto"`` (default): on GPUs and other non-CPU devices a command buffer where
    the driver has the extension, else direct; on CPU devices pyopencl's (cheapest there).
    Results are the same in every mode; ``stats()["enqueue"]`` names the one in use. Profiling
    enqueues through pyopencl whatever this says, since each launch needs its own event.
    ``fuse_depthwise``: in the GPU kernel family, compute a DEPTHWISE_CONV_2D that only a 1x1
    CONV_2D reads inside that product's launch (one launch and one tensor fewer per pair, the
    depthwise taps computed again for each output-channel tile). ``None`` (default): where the
    autotuner runs (GPUs, unless ``autotune=False``), which times each fused product's tile and
    split as a problem of its own; not where it does not (CPU devices), since the plain
    product's rule-of-thumb tile made fused pairs slower on a GPU. ``True``: every pair;
    ``False``: none. Results are the same either way; ``stats()["depthwise_fused"]`` counts
    the fused pairs.
    ``fuse_gates``: in the GPU kernel family, compute a squeeze-excite MUL of x by a gate with
    one value per image and channel, when only a 1x1 CONV_2D reads it, inside that product's
    launch (x scaled as the product loads it: one launch and one tensor fewer, the same bits
    in float32 storage). On by default; ``stats()["gates_fused"]`` counts them. It also runs
    the gate itself, a MEAN over H and W and the two 1x1 CONV_2Ds after it, as one launch
    (se_gate, one work-group per image) where they do at most 2^18 multiply-adds per image;
    ``stats()["squeezes_fused"]`` counts those.
    """

    precision_loss_allowed: bool = False
    enable_quant: bool = True
    serialization_dir: str | None = None
    model_token: str | None = None
    platform: int | str | None = None
    device: int | str | None = None
    kernel_family: Literal["auto", "cpu", "gpu"] = "auto"
    autotune: bool | None = None
    flush_every: NonNegativeInt | None = None
    enqueue: EnqueueMode = "auto"
    fuse_depthwise: bool | None = None
    fuse_gates: bool = True


class GpuOpenCLDelegate(Delegate):
    name = "gpu_opencl"
    version = __version__
    Options = GpuOpenCLOptions
    CAPABILITIES = _CAPS[True]

    @classmethod
    def availability(cls) -> offload.Availability:
        reason = probe()
        return offload.Availability(reason is None, reason or "")

    @property
    def capabilities(self) -> Capabilities:
        return _CAPS[self.options.enable_quant]

    def device_identity(self) -> dict[str, str]:
        """The OpenCL device these options select and its driver, so that a choice "auto"
        measured on one device or driver is measured again on another. The device is opened
        once per process (the handles are shared), so a later call only reads names."""
        try:
            handle = open_device(self.options.platform, self.options.device)
        except Exception as exc:  # the choice records why, rather than failing
            return {"device": "none", "driver": f"{type(exc).__name__}: {exc}"}
        return {"device": handle.name, "driver": handle.driver}

    def check_node(self, node: offload.Node, subgraph: offload.Subgraph) -> str | None:
        # The op's own check: constant weights, its shape rule (omitted inputs, strides,
        # windows, weight shapes, broadcasts, slice ranges) and what else data cannot say.
        # What it refuses stays on the CPU reference, which raises its own error where the
        # model is invalid rather than merely beyond these kernels.
        spec = SPECS.get(node.op)
        if spec is None:
            return f"gpu_opencl has no shape rule for {node.op}"
        return spec.reason(node, subgraph)

    def create_kernel(self) -> GpuKernel:
        return GpuKernel(self.options, __version__)

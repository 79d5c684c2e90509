"""One partition in LiteRT's ``CompiledModel`` on its GPU accelerator (``accelerator="gpu"``).

LiteRT's GPU path on Linux is WebGPU (Dawn, on Vulkan): the accelerator starts only where a
GPU and its Vulkan driver are present. Whether it does is asked of LiteRT once per process,
with a one-ADD model on the GPU alone; where it does not, the delegate is unavailable with
what LiteRT logged (no Vulkan loader, no adapter). Partitions compile with GPU and CPU
together, as LiteRT recommends: ops the GPU does not take run on LiteRT's CPU kernels inside
the same compiled model.

The compiled model has no variable tensors (LiteRT refuses them), so the delegate declines
stateful nodes in this mode, and a partition has no state to reset.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

import offload
from offload import DelegateKernel
from offload.model import ModelBuilder
from offload_litert._engine import compiled_api, native_stderr
from offload_litert._kernel import litert_failure

if TYPE_CHECKING:
    from offload_litert._delegate import LiteRTOptions

__all__ = ["CompiledKernel", "gpu_hardware", "gpu_unavailable_reason"]


def _api() -> Any:
    """LiteRT's CompiledModel modules, as the plugin bound them when it loaded."""
    if compiled_api is None:
        raise ImportError("LiteRT's compiled_model modules did not import")
    return compiled_api


def gpu_hardware() -> Any:
    """GPU with the CPU beside it, for partitions."""
    accelerator = _api()[2].HardwareAccelerator
    return accelerator.GPU | accelerator.CPU


@functools.cache
def gpu_unavailable_reason() -> str:
    """Empty when LiteRT's GPU accelerator compiles a model here, else LiteRT's reason."""
    try:
        compiled_model, _, hardware_accelerator, options = _api()
    except Exception as exc:
        return f"the installed ai-edge-litert has no CompiledModel API ({exc})"
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 8), dtype=np.float32)
    y = b.add_tensor("y", shape=(1, 8), dtype=np.float32)
    b.add_operator("ADD", [x, x], [y])
    b.add_output(y)
    failure = ""
    # Only text leaves the try: the exception's frames hold LiteRT's environment, whose
    # teardown logs too, and it must go while its log is still being collected.
    with native_stderr() as log:
        try:
            compiled_model.CompiledModel.from_buffer(
                b.build(),
                options=options.Options(hardware_accelerator.HardwareAccelerator.GPU),
            )
        except Exception as exc:
            failure = f"{type(exc).__name__}: {exc}"
    if not failure:
        return ""
    return str(litert_failure("could not start its GPU accelerator", failure, log))


class CompiledKernel(DelegateKernel):
    """Runs one partition in LiteRT's CompiledModel on ``hardware`` (GPU | CPU)."""

    def __init__(self, options: LiteRTOptions, hardware: Any) -> None:
        self.options = options
        self.hardware = hardware

    def init(self, subgraph: offload.Subgraph, partition: offload.Partition) -> None:
        compiled_model, cpu_options, _, options = _api()
        self.exported = offload.export_partition(subgraph, partition)
        mode = cpu_options.CpuKernelMode
        cpu = cpu_options.CpuOptions(
            num_threads=self.options.num_threads,
            kernel_mode=mode.XNNPACK if self.options.kernels == "xnnpack" else mode.BUILTIN,
        )
        gpu = options.GpuOptions(enforce_f32=not self.options.precision_loss_allowed)
        with native_stderr() as log:
            try:
                self.model = compiled_model.CompiledModel.from_buffer(
                    self.exported.model_bytes,
                    options=options.Options(self.hardware, cpu_options=cpu, gpu_options=gpu),
                )
            except Exception as exc:
                failure: Exception | None = exc
            else:
                failure = None
        if failure is not None:
            raise litert_failure("could not compile the partition", failure, log)
        # The exported model has no signature; LiteRT makes a placeholder one over its inputs
        # and outputs, by tensor name. Match them to the model's inputs by tensor index.
        key = next(iter(self.model.get_signature_list()))
        wanted = offload.load_model(model_content=self.exported.model_bytes).main.inputs
        names = self.model.get_signature_by_index(0)["inputs"]
        details = self.model.get_input_tensor_details(key)
        where = {details[name]["index"]: k for k, name in enumerate(names)}
        if sorted(where) != sorted(wanted):
            raise offload.errors.DelegateError(
                f"LiteRT's signature for the partition has inputs {sorted(where)}, expected "
                f"tensors {list(wanted)}"
            )
        # Signature position of each model input, in the model's (exported) input order.
        self._order = [where[t] for t in wanted]
        declared = {k: tuple(details[name]["shape"]) for k, name in enumerate(names)}
        self._held = [declared[slot] for slot in self._order]
        self._shapes: list[tuple[int, ...]] | None = None
        self.fully_accelerated = bool(self.model.is_fully_accelerated())

    def prepare(self, input_shapes: Sequence[tuple[int, ...]]) -> None:
        self._allocate([tuple(input_shapes[p]) for p in self.exported.input_positions])

    def _allocate(self, shapes: list[tuple[int, ...]]) -> None:
        if shapes == self._shapes:
            return
        for slot, shape, held in zip(self._order, shapes, self._held):
            if shape != held:
                self.model.resize_input_tensor(slot, list(shape), 0, strict=False)
        self._held = shapes
        self._in = self.model.create_input_buffers(0)
        self._outs = self.model.create_output_buffers(0)
        self._read = []
        for buffer in self._outs:
            d = buffer.get_tensor_details()
            shape = tuple(int(n) for n in d["shape"])
            self._read.append((int(np.prod(shape)), np.dtype(d["dtype"]), shape))
        self._shapes = shapes

    def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        arrays = [inputs[p] for p in self.exported.input_positions]
        self._allocate([a.shape for a in arrays])
        for slot, array in zip(self._order, arrays):
            self._in[slot].write(array)
        self.model.run_by_index(0, self._in, self._outs)
        return [
            buffer.read(count, dtype).reshape(shape)
            for buffer, (count, dtype, shape) in zip(self._outs, self._read)
        ]

    def stats(self) -> dict[str, Any]:
        return {
            "engine": "CompiledModel",
            "accelerator": "gpu",
            "fully_accelerated": self.fully_accelerated,
            "kernels": self.options.kernels,
            "num_threads": self.options.num_threads,
        }

"""One partition in OpenVINO: compile (or import from the cache) once, then bind and run.

``init`` finds the partition's compiled model in the cache by its fingerprint and imports it,
or exports the partition, has the TensorFlow Lite frontend convert it, compiles it for the
device and stores it. One infer request per partition is made then and reused.

The hot path is a synchronous ``infer`` on tensors bound once per shape, over arrays this
kernel keeps: no tensor is made or bound per invoke (binding a new input tensor each invoke
measured 1.6 ms slower on MobileNetV2 int8, ~40% of its time). Each boundary input is copied
in once (the interpreter hands a delegate read-only views, and OpenVINO's Python API shares
only writable memory); OpenVINO writes outputs straight into the kernel's arrays, which
``invoke`` returns (the interpreter copies them into its own buffers, as it does for every
kernel that reuses its outputs).
"""

from __future__ import annotations

import io
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

import offload
from offload import DelegateKernel
from offload.errors import DelegateError
from offload_openvino._engine import can_export, core, ov, ov_failure, read_tflite

if TYPE_CHECKING:
    from offload_openvino._cache import CompiledModelCache

__all__ = ["OpenVINOKernel"]


class OpenVINOKernel(DelegateKernel):
    """Runs one partition in an OpenVINO compiled model on ``device``."""

    def __init__(
        self,
        device: str,
        config: dict[str, Any],
        settings: dict[str, Any],
        cache: CompiledModelCache | None,
    ) -> None:
        self.device = device
        self.config = config  # properties handed to OpenVINO's compile / import
        self.settings = settings  # what the compiled model depends on, for the cache key
        self.cache = cache
        self.cache_hit = False
        self.compile_ms = 0.0
        self.blob_bytes = 0
        self._invokes = 0

    def init(self, subgraph: offload.Subgraph, partition: offload.Partition) -> None:
        self.subgraph = subgraph
        self.partition = partition
        tensors = subgraph.tensors
        # The exported model's inputs: partition.inputs less the variables it would keep itself
        # (ExportedPartition.state; none here, as the delegate declines nodes reading state),
        # in their order; its outputs are partition.outputs.
        self._positions = tuple(
            k for k, t in enumerate(partition.inputs) if not tensors[t].is_variable
        )
        self._dtypes = [tensors[partition.inputs[p]].dtype for p in self._positions]
        self._declared = [tuple(tensors[partition.inputs[p]].shape) for p in self._positions]
        self._stage_at = {p: k for k, p in enumerate(self._positions)}
        self._fingerprint: str | None = None
        self._imported: np.ndarray | None = None  # the cache buffer an imported model reads
        self.compiled: Any = None
        self._shapes: list[tuple[int, ...]] | None = None

    # -- compiling ----------------------------------------------------------------------------

    def _compile(self, shapes: list[tuple[int, ...]]) -> None:
        """The compiled model for input ``shapes``, from the cache or compiled now."""
        start = time.perf_counter()
        resized = shapes != self._declared
        settings = {**self.settings, "shapes": shapes if resized else "declared"}
        key = None
        if self.cache is not None and can_export(self.device):
            if self._fingerprint is None:
                self._fingerprint = offload.partition_fingerprint(self.subgraph, self.partition)
            key = self.cache.key(self._fingerprint, settings)
            blob = self.cache.load(key)
            if blob is not None:
                # Shared, not copied: OpenVINO's CPU plugin then uses weights from this buffer
                # in place (measured: overwriting it after the import changes the outputs), so
                # the kernel keeps it as long as the compiled model.
                buffer = np.frombuffer(blob, np.uint8)
                assert ov is not None
                try:
                    stream = ov.Tensor(buffer, shared_memory=True)
                    self.compiled = core().import_model(stream, self.device, self.config)
                except Exception as exc:
                    # Sealed by us, yet refused: made by a build that reads it differently.
                    self.cache.discard(key, f"OpenVINO could not import it ({exc})")
                else:
                    self._imported = buffer
                    self.cache_hit = True
                    self.blob_bytes = len(blob)
                    self._finish(shapes, start)
                    return
        exported = offload.export_partition(self.subgraph, self.partition)
        model = read_tflite(exported.model_bytes)
        del exported  # the exported bytes can go: OpenVINO holds the model now
        if resized:
            try:
                model.reshape({k: list(s) for k, s in enumerate(shapes)})
            except Exception as exc:
                raise ov_failure(f"reshape the partition's inputs to {shapes}", exc) from None
        config = dict(self.config)
        if self.cache is not None and key is None:
            config["CACHE_DIR"] = self.cache.native_dir()
        try:
            self.compiled = core().compile_model(model, self.device, config)
        except Exception as exc:
            raise ov_failure(f"compile the partition for {self.device}", exc) from None
        self._imported = None
        if key is not None:
            assert self.cache is not None
            written = self.compiled.export_model()
            data = written.getvalue() if isinstance(written, io.BytesIO) else bytes(written)
            self.blob_bytes = len(data)
            self.cache.store(key, data)
        self._finish(shapes, start)

    def _finish(self, shapes: list[tuple[int, ...]], start: float) -> None:
        assert ov is not None
        compiled = self.compiled
        ports_in, ports_out = list(compiled.inputs), list(compiled.outputs)
        if len(ports_in) != len(self._positions) or len(ports_out) != len(self.partition.outputs):
            raise DelegateError(
                f"OpenVINO's model of the partition has {len(ports_in)} inputs and "
                f"{len(ports_out)} outputs, expected {len(self._positions)} and "
                f"{len(self.partition.outputs)}"
            )
        for k, (port, dtype) in enumerate(zip(ports_in, self._dtypes)):
            if port.element_type.to_dtype() != dtype:
                raise DelegateError(
                    f"OpenVINO's model of the partition reads input {k} as "
                    f"{port.element_type.to_dtype()}, expected {dtype}"
                )
        self.request = compiled.create_infer_request()
        self._infer = self.request.infer
        tensors = self.subgraph.tensors
        self._out: list[np.ndarray] = []
        for k, (port, t) in enumerate(zip(ports_out, self.partition.outputs)):
            if port.partial_shape.is_dynamic:
                self._out = []  # sizes known only after a run: OpenVINO allocates them
                break
            array = np.empty(tuple(port.shape), tensors[t].dtype)
            self.request.set_output_tensor(k, ov.Tensor(array, shared_memory=True))
            self._out.append(array)
        self._bind(shapes)
        self._shapes = shapes
        self.compile_ms += 1000 * (time.perf_counter() - start)

    def _bind(self, shapes: list[tuple[int, ...]]) -> None:
        """Arrays of this kernel's own that OpenVINO reads its inputs from, bound once per
        shape: the interpreter hands a delegate read-only views of its buffers, and OpenVINO's
        Python API shares only writable memory, so each invoke copies each input in once."""
        assert ov is not None
        self._stage: list[np.ndarray] = []
        for k, (shape, dtype) in enumerate(zip(shapes, self._dtypes)):
            array = np.empty(shape, dtype)
            self.request.set_input_tensor(k, ov.Tensor(array, shared_memory=True))
            self._stage.append(array)

    def prepare(self, input_shapes: Sequence[tuple[int, ...]]) -> None:
        shapes = [tuple(input_shapes[p]) for p in self._positions]
        if shapes != self._shapes:
            assert ov is not None
            if (
                self.compiled is not None
                and all(
                    port.partial_shape.compatible(ov.PartialShape(list(s)))
                    for port, s in zip(self.compiled.inputs, shapes)
                )
                and any(port.partial_shape.is_dynamic for port in self.compiled.inputs)
            ):
                # A model with dynamic dimensions runs any shape it admits as it is.
                self._shapes = shapes
                self._bind(shapes)
                return
            self._compile(shapes)

    # -- running ------------------------------------------------------------------------------

    def take_input(self, position: int, value: np.ndarray) -> bool:
        # Straight from set_tensor into the array OpenVINO reads: one copy instead of two.
        k = self._stage_at.get(position)
        if k is None or value.shape != self._stage[k].shape:
            return False
        np.copyto(self._stage[k], value)
        return True

    def read_input(self, position: int) -> np.ndarray:
        return np.array(self._stage[self._stage_at[position]])

    def invoke(self, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        stage = self._stage
        for k, p in enumerate(self._positions):
            array = inputs[p]
            if array is None:  # taken by take_input: in OpenVINO's input already
                continue
            if array.shape != stage[k].shape:
                # A shape only the values settled (a RESHAPE to a computed shape upstream).
                held = {q: self.read_input(q) for q, a in enumerate(inputs) if a is None}
                shapes = [held[q].shape if a is None else a.shape for q, a in enumerate(inputs)]
                self.prepare(shapes)
                for q, value in held.items():
                    np.copyto(self._stage[self._stage_at[q]], value)
                return self.invoke(inputs)
            np.copyto(stage[k], array)
        self._infer(share_outputs=True)
        self._invokes += 1
        if self._out:
            return self._out
        tensors = self.subgraph.tensors
        return [
            np.array(self.request.get_output_tensor(k).data, dtype=tensors[t].dtype)
            for k, t in enumerate(self.partition.outputs)
        ]

    def memory_bytes(self) -> dict[str, int]:
        """Host: the input and output arrays OpenVINO reads and writes, and the cached compiled
        model it was imported from (whose weights it reads in place). OpenVINO's own memory
        (weights in its layout, its arena) is not visible from Python: not counted."""
        held = sum(a.nbytes for a in (*self._out, *self._stage))
        if self._imported is not None:
            held += self._imported.nbytes
        return {"device": 0, "host": held}

    def stats(self) -> dict[str, Any]:
        return {
            "engine": "OpenVINO",
            "device": self.device,
            "execution_devices": _execution_devices(self.compiled),
            "config": {k: str(v) for k, v in self.config.items()},
            "cache": "off" if self.cache is None else "hit" if self.cache_hit else "miss",
            "compile_ms": round(self.compile_ms, 3),
            "compiled_bytes": self.blob_bytes,
            "invokes": self._invokes,
        }


def _execution_devices(compiled: Any) -> list[str]:
    try:
        return [str(d) for d in compiled.get_property("EXECUTION_DEVICES")]
    except Exception:
        return []

"""The openvino delegate: options, declared capabilities, per-node checks, devices.

Every partition is written as a standalone .tflite by ``offload.export_partition``, converted
by OpenVINO's TensorFlow Lite frontend and compiled for the device the options name. What the
frontend converts is declared in _ops, each op checked by a single-op test.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import NonNegativeInt, field_validator, model_validator

import offload
from offload import Capabilities, Delegate, DelegateOptions, ModelType, ModelTypeSupport
from offload.errors import DelegateUnavailableError
from offload.model import option_names
from offload_openvino._engine import (
    IMPORT_ERROR,
    can_export,
    describe_devices,
    devices,
    ov,
    resolve_device,
    supported_properties,
    version,
)
from offload_openvino._ops import DECLARED, NOT_DECLARED, TENSOR_TYPES

__all__ = ["OpenVINODelegate", "OpenVINOOptions", "capabilities"]

__version__ = "0.1.0"

# Why dynamic-range models are refused unless asked for (the capability's reason).
DYNAMIC_RANGE_REASON = (
    "OpenVINO computes dynamic-range (hybrid) layers in float with dequantized weights, where "
    "LiteRT quantizes their activations on the fly, so the numbers differ from LiteRT's by "
    "design (MobileNetV2: up to 12% of the output's range); dynamic_range='float' runs them "
    "that way"
)
_FLOAT_NOTE = (
    "in float with dequantized weights (dynamic_range='float'); the numbers differ from "
    "LiteRT's hybrid kernels, which quantize activations on the fly"
)


def capabilities(dynamic_range: str = "refuse") -> Capabilities:
    """What OpenVINO's TensorFlow Lite frontend converts, per op (see _ops)."""
    types: dict[ModelType, ModelTypeSupport]
    if ov is None:
        no = ModelTypeSupport(support="no", reason=IMPORT_ERROR)
        types = dict.fromkeys(("float32", "float16", "dynamic_range", "int8", "qat"), no)
    else:
        yes = ModelTypeSupport(support="yes")
        types = {
            "float32": yes,
            "float16": ModelTypeSupport(
                support="yes", reason="float16 weights arrive folded to float32 by the core"
            ),
            "dynamic_range": (
                ModelTypeSupport(support="yes", reason=_FLOAT_NOTE)
                if dynamic_range == "float"
                else ModelTypeSupport(support="no", reason=DYNAMIC_RANGE_REASON)
            ),
            "int8": yes,
            "qat": yes,
        }
    return Capabilities(
        ops=DECLARED,
        unsupported_ops=dict(NOT_DECLARED),
        model_types=types,
        precisions=("float32", "float16", "int8"),
        # Measured (benchmarks/engines_vs_litert.py, RESULTS.md): the CPU reference takes a
        # median 6.2x the time of offload + openvino on the face models and full-size
        # networks, one thread each (3.3x-13.7x).
        expected_speedup=6.0,
    )


_CAPS = {mode: capabilities(mode) for mode in ("refuse", "float")}


def hardware_kind(device: str) -> str:
    """The kind of hardware an OpenVINO device is, as CompiledModel names kinds: a virtual
    device (AUTO:GPU,CPU) counts as its first named device; one naming none, as the CPU."""
    kind, _, members = device.partition(":")
    if kind.upper() in _VIRTUAL_KINDS:
        kind = members.split(",")[0] if members else "CPU"
    kind = kind.split(".")[0].strip().lower()
    return kind if kind in ("cpu", "gpu", "npu") else "cpu"


_VIRTUAL_KINDS = ("AUTO", "MULTI", "HETERO", "BATCH")


class OpenVINOOptions(DelegateOptions):
    """Options of the openvino delegate.

    ``device``: ``"CPU"`` (default), ``"GPU"``, ``"NPU"``, ``"AUTO"`` (OpenVINO chooses, also
    ``"AUTO:GPU,CPU"``), a device OpenVINO lists (``"GPU.1"``) or its full name as
    ``offload delegates`` shows it. ``num_threads``: OpenVINO's inference threads (1, as
    LiteRT's Python API; 0 leaves the choice to OpenVINO). ``performance_hint``: OpenVINO's
    ``"LATENCY"`` or ``"THROUGHPUT"`` (unset: its default, latency). ``inference_precision``:
    ``"f32"`` (the default, also on CPUs whose OpenVINO default is bf16), or ``"bf16"`` /
    ``"f16"``, which need ``precision_loss_allowed``; with ``precision_loss_allowed`` and no
    precision named, the device's own default. ``dynamic_range``: ``"refuse"`` (default)
    leaves dynamic-range models to the CPU, with the reason; ``"float"`` runs them in float
    with dequantized weights, numbers differing from LiteRT's hybrid kernels.
    ``cache_dir``: where compiled models are kept (default
    ``offload.cache.default_location("openvino")``; ``""`` for no cache). ``cpu_pinning``:
    OpenVINO's ``ENABLE_CPU_PINNING`` on the CPU. Off by default, unlike OpenVINO: LiteRT pins
    nothing, and a pinned inference thread waits for its core while another process holds it
    (measured on a 2-core machine with one core busy: face_landmark at 2 threads took 4.0 ms
    pinned, 1.2 ms unpinned).
    """

    device: str = "CPU"
    num_threads: NonNegativeInt = 1
    performance_hint: Literal["LATENCY", "THROUGHPUT"] | None = None
    inference_precision: Literal["f32", "bf16", "f16"] | None = None
    precision_loss_allowed: bool = False
    dynamic_range: Literal["refuse", "float"] = "refuse"
    cache_dir: str | None = None
    cpu_pinning: bool = False

    @field_validator("device")
    @classmethod
    def _named(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("expected a device name such as 'CPU', 'GPU', 'NPU' or 'AUTO'")
        # OpenVINO's device names are upper case; a full device name keeps its own case.
        return value.upper() if value.upper().split(":")[0].split(".")[0] in _KINDS else value

    @field_validator("performance_hint", mode="before")
    @classmethod
    def _any_case(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("inference_precision", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _loss_is_allowed(self) -> OpenVINOOptions:
        if self.inference_precision in ("bf16", "f16") and not self.precision_loss_allowed:
            raise ValueError(
                f"inference_precision={self.inference_precision!r} computes in 16 bits; set "
                "precision_loss_allowed=True to allow that, or use 'f32'"
            )
        return self


_KINDS = ("CPU", "GPU", "NPU", "AUTO", "MULTI", "HETERO", "BATCH")


class OpenVINODelegate(Delegate):
    name = "openvino"
    version = __version__
    Options = OpenVINOOptions
    CAPABILITIES = _CAPS["refuse"]

    def __init__(self, options: Mapping[str, Any] | DelegateOptions | None = None) -> None:
        super().__init__(options)
        opts: OpenVINOOptions = self.options
        self.device = opts.device
        self._cache: Any = None
        self._cache_opened = False
        if ov is None:
            return  # unavailable: availability() says why
        device, reason = resolve_device(opts.device)
        if reason:
            raise DelegateUnavailableError(
                f"delegate 'openvino' with device={opts.device!r} is unavailable here: {reason}"
            )
        self.device = device

    @classmethod
    def availability(cls) -> offload.Availability:
        if ov is None:
            return offload.Availability(False, IMPORT_ERROR)
        try:
            listed = describe_devices()
        except Exception as exc:
            return offload.Availability(False, f"OpenVINO could not list its devices: {exc}")
        return offload.Availability(True, f"OpenVINO {version().split('-')[0]}; {listed}")

    @property
    def capabilities(self) -> Capabilities:
        caps = _CAPS[self.options.dynamic_range]
        kind = hardware_kind(self.device)
        return caps if kind == "cpu" else caps.model_copy(update={"hardware": kind})

    @classmethod
    def options_for_hardware(cls, kind: str) -> dict[str, Any] | None:
        return {"device": kind.upper()} if kind in ("cpu", "gpu", "npu") else None

    def check_node(self, node: offload.Node, subgraph: offload.Subgraph) -> str | None:
        return (
            offload.check_engine_node(node, subgraph, engine="OpenVINO", float_rescale=True)
            or _type_reason(node, subgraph)
            or _options_reason(node)
        )

    def compile_config(self) -> dict[str, Any]:
        """The properties compile_model gets, those the device takes."""
        opts: OpenVINOOptions = self.options
        wanted: dict[str, Any] = {}
        if opts.num_threads:
            wanted["INFERENCE_NUM_THREADS"] = opts.num_threads
        wanted["PERFORMANCE_HINT"] = opts.performance_hint or "LATENCY"
        if opts.inference_precision is not None:
            wanted["INFERENCE_PRECISION_HINT"] = opts.inference_precision
        elif not opts.precision_loss_allowed:
            wanted["INFERENCE_PRECISION_HINT"] = "f32"
        wanted["ENABLE_CPU_PINNING"] = opts.cpu_pinning
        if not opts.precision_loss_allowed:
            # The CPU quantizes activations of layers with compressed (int8) weights on the fly
            # unless told not to: dynamic-range models in float mode compute in float.
            wanted["DYNAMIC_QUANTIZATION_GROUP_SIZE"] = 0
        taken = supported_properties(self.device)
        if not taken:  # a virtual device that does not list them: hand over the hints only
            taken = {"PERFORMANCE_HINT", "INFERENCE_PRECISION_HINT"}
        return {k: v for k, v in wanted.items() if k in taken}

    def cache(self) -> Any:
        if not self._cache_opened:
            from offload_openvino._cache import open_cache

            self._cache_opened = True
            identity = {
                "openvino": version(),
                "device": self.device,
                "full_device_name": devices().get(self.device, describe_devices()),
                "plugin": __version__,
                "exports": str(can_export(self.device)),
            }
            self._cache = open_cache(self.options.cache_dir, identity)
        return self._cache

    def create_kernel(self) -> offload.DelegateKernel:
        from offload_openvino._kernel import OpenVINOKernel

        config = self.compile_config()
        settings = {"device": self.device, "config": config}
        return OpenVINOKernel(self.device, config, settings, self.cache())


def _type_reason(node: offload.Node, subgraph: offload.Subgraph) -> str | None:
    for t in (*node.inputs, *node.outputs):
        if t >= 0 and subgraph.tensors[t].type_name not in TENSOR_TYPES:
            return (
                f"tensor {t} is {subgraph.tensors[t].type_name}, a type the delegate does not "
                f"hand OpenVINO (it takes {', '.join(sorted(TENSOR_TYPES))})"
            )
    return None


def _options_reason(node: offload.Node) -> str | None:
    """Nodes whose options OpenVINO's frontend would read wrongly or not at all."""
    fields = option_names(node.op)
    if node.options.type_name == "NoOptions" and fields:
        if node.op == "RESHAPE" and len(node.inputs) == 2:
            return None  # the frontend takes the shape input when there is no table
        return (
            f"the node has no {node.op} options table, and OpenVINO's TensorFlow Lite frontend "
            f"reads {', '.join(fields)} from it (it refuses such a node)"
        )
    if node.op == "RESHAPE" and len(node.inputs) == 2 and node.options.type_name != "NoOptions":
        if not node.options.get("new_shape"):
            return (
                "the node has a shape input and an empty new_shape option; OpenVINO's "
                "TensorFlow Lite frontend takes the option over the input when the options "
                "table is there (LiteRT takes the input)"
            )
    return None

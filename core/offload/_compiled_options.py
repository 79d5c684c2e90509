"""LiteRT 2.x's CompiledModel options, with LiteRT's names, fields, defaults and enum values,
and what each one means for offload's delegates.

``CpuOptions`` and ``GpuOptions`` map onto the delegates' own options; ``IntelOpenVinoOptions``
onto the openvino delegate's. Options that no delegate here can honour are kept and reported
as unused (``CompiledModel.delegation_report()["compiled_model"]["unused_options"]``, and one
warning), never dropped in silence. The translation reads attributes, so LiteRT's own option
objects are taken as well as these.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from offload.errors import UsageError

__all__ = [
    "CpuKernelMode",
    "CpuOptions",
    "GpuOptions",
    "HardwareAccelerator",
    "IntelOpenVinoGraphBackend",
    "IntelOpenVinoOptions",
    "IntelOpenVinoPerformanceMode",
    "Options",
    "QualcommBackend",
    "QualcommDspPerformanceMode",
    "QualcommGraphIOTensorMemType",
    "QualcommGraphPriority",
    "QualcommHtpPerformanceMode",
    "QualcommLogLevel",
    "QualcommOptimizationLevel",
    "QualcommOptions",
    "QualcommProfiling",
    "Translation",
    "kinds_of",
    "resolve_options",
    "translate",
]


class HardwareAccelerator(enum.IntFlag):
    """The kinds of hardware a CompiledModel may run on, combined with ``|`` (LiteRT's bits).

    offload plans with the installed delegates whose ``Capabilities.hardware`` is one of the
    kinds asked for; the CPU reference counts as CPU. Without CPU in the set, a node that no
    delegate of those kinds takes is an error, as in LiteRT.
    """

    CPU = enum.auto()
    GPU = enum.auto()
    NPU = enum.auto()


class CpuKernelMode(enum.IntEnum):
    """Which CPU kernels run: ``DELEGATE`` (also ``XNNPACK``) the CPU engines (litert with
    XNNPACK, openvino), ``REFERENCE`` offload's CPU reference alone, ``BUILTIN`` LiteRT's
    builtin kernels (the litert delegate with ``kernels="builtin"``)."""

    DELEGATE = 0
    XNNPACK = 0
    REFERENCE = 1
    BUILTIN = 2


@dataclass
class CpuOptions:
    """LiteRT's CPU options. ``num_threads`` goes to the CPU delegates' ``num_threads`` (0:
    their default, one thread, which is what LiteRT does with 0 too); ``kernel_mode`` chooses
    the CPU kernels (:class:`CpuKernelMode`). ``enable_ynnpack``, ``xnnpack_flags`` and
    ``xnnpack_weight_cache_path`` have no counterpart in offload's delegates: reported unused."""

    num_threads: int = 0
    kernel_mode: CpuKernelMode | None = None
    enable_ynnpack: bool = False
    xnnpack_flags: int | None = None
    xnnpack_weight_cache_path: str = ""


@dataclass
class GpuOptions:
    """LiteRT's GPU options. ``enforce_f32`` False (LiteRT's default) lets the GPU delegates
    compute in float16 (their ``precision_loss_allowed``), True keeps float32; the rest have no
    counterpart here and are reported unused when set."""

    enforce_f32: bool = False
    constant_tensor_sharing: bool = False
    infinite_float_capping: bool = False
    benchmark_mode: bool = False
    allow_src_quantized_fc_conv_ops: bool = False
    hint_waiting_for_completion: bool = False


class IntelOpenVinoGraphBackend(enum.IntEnum):
    CPU = 0
    GPU = 1
    NPU = 2


class IntelOpenVinoPerformanceMode(enum.IntEnum):
    LATENCY = 0
    THROUGHPUT = 1
    CUMULATIVE_THROUGHPUT = 2


@dataclass
class IntelOpenVinoOptions:
    """LiteRT's OpenVINO options, for the openvino delegate: ``graph_backend`` is its
    ``device``, ``performance_mode`` its ``performance_hint`` (LATENCY, THROUGHPUT);
    ``CUMULATIVE_THROUGHPUT``, ``configs_map`` and ``enable_weight_sharing`` are reported
    unused."""

    GRAPH_BACKEND = IntelOpenVinoGraphBackend
    PERFORMANCE_MODE = IntelOpenVinoPerformanceMode

    graph_backend: IntelOpenVinoGraphBackend | None = None
    performance_mode: IntelOpenVinoPerformanceMode | None = None
    configs_map: dict[str, str] = field(default_factory=dict)
    enable_weight_sharing: bool | None = None


class QualcommLogLevel(enum.IntEnum):
    OFF = 0
    ERROR = 1
    WARN = 2
    INFO = 3
    VERBOSE = 4
    DEBUG = 5


class QualcommHtpPerformanceMode(enum.IntEnum):
    DEFAULT = 0
    SUSTAINED_HIGH_PERFORMANCE = 1
    BURST = 2
    HIGH_PERFORMANCE = 3
    POWER_SAVER = 4
    LOW_POWER_SAVER = 5
    HIGH_POWER_SAVER = 6
    LOW_BALANCED = 7
    BALANCED = 8
    EXTREME_POWER_SAVER = 9


class QualcommDspPerformanceMode(enum.IntEnum):
    DEFAULT = 0
    SUSTAINED_HIGH_PERFORMANCE = 1
    BURST = 2
    HIGH_PERFORMANCE = 3
    POWER_SAVER = 4
    LOW_POWER_SAVER = 5
    HIGH_POWER_SAVER = 6
    LOW_BALANCED = 7
    BALANCED = 8


class QualcommProfiling(enum.IntEnum):
    OFF = 0
    BASIC = 1
    DETAILED = 2
    LINTING = 3
    OPTRACE = 4


class QualcommOptimizationLevel(enum.IntEnum):
    OPTIMIZE_FOR_INFERENCE = 0
    OPTIMIZE_FOR_PREPARE = 1
    OPTIMIZE_FOR_INFERENCE_O3 = 2


class QualcommGraphPriority(enum.IntEnum):
    DEFAULT = 0
    LOW = 1
    NORMAL = 2
    NORMAL_HIGH = 3
    HIGH = 4


class QualcommBackend(enum.IntEnum):
    UNDEFINED = 0
    GPU = 1
    HTP = 2
    DSP = 3
    IR = 4


class QualcommGraphIOTensorMemType(enum.IntEnum):
    RAW = 0
    MEM_HANDLE = 1


@dataclass
class QualcommOptions:
    """LiteRT's Qualcomm (QNN) options: no delegate here runs on Qualcomm's SDK, so each field
    that is set is reported unused."""

    LOG_LEVEL = QualcommLogLevel
    HTP_PERFORMANCE_MODE = QualcommHtpPerformanceMode
    DSP_PERFORMANCE_MODE = QualcommDspPerformanceMode
    PROFILING = QualcommProfiling
    OPTIMIZATION_LEVEL = QualcommOptimizationLevel
    GRAPH_PRIORITY = QualcommGraphPriority
    BACKEND = QualcommBackend
    GRAPH_IO_TENSOR_MEM_TYPE = QualcommGraphIOTensorMemType

    log_level: QualcommLogLevel | None = None
    htp_performance_mode: QualcommHtpPerformanceMode | None = None
    dsp_performance_mode: QualcommDspPerformanceMode | None = None
    use_int64_bias_as_int32: bool | None = None
    enable_weight_sharing: bool | None = None
    use_conv_hmx: bool | None = None
    use_fold_relu: bool | None = None
    profiling: QualcommProfiling | None = None
    dump_tensor_ids: Sequence[int] | None = None
    ir_json_dir: str = ""
    dlc_dir: str = ""
    vtcm_size: int | None = None
    num_hvx_threads: int | None = None
    optimization_level: QualcommOptimizationLevel | None = None
    graph_priority: QualcommGraphPriority | None = None
    backend: QualcommBackend | None = None
    saver_output_dir: str = ""
    graph_io_tensor_mem_type: QualcommGraphIOTensorMemType | None = None


@dataclass(init=False)
class Options:
    """Per-model options (LiteRT's): the hardware set and each kind's or vendor's options."""

    hardware_accelerators: HardwareAccelerator = HardwareAccelerator.CPU
    _cpu_options: CpuOptions | None = None
    _gpu_options: GpuOptions | None = None
    _qualcomm_options: QualcommOptions | None = None
    _intel_openvino_options: IntelOpenVinoOptions | None = None

    def __init__(
        self,
        hardware_accelerators: HardwareAccelerator = HardwareAccelerator.CPU,
        cpu_options: CpuOptions | None = None,
        gpu_options: GpuOptions | None = None,
        qualcomm_options: QualcommOptions | None = None,
        intel_openvino_options: IntelOpenVinoOptions | None = None,
    ) -> None:
        self.hardware_accelerators = hardware_accelerators
        self._cpu_options = cpu_options
        self._gpu_options = gpu_options
        self._qualcomm_options = qualcomm_options
        self._intel_openvino_options = intel_openvino_options

    @classmethod
    def create(cls) -> Options:
        return cls()

    @property
    def cpu_options(self) -> CpuOptions:
        """The CPU options, made (with defaults) on first read so they can be set in place."""
        if self._cpu_options is None:
            self._cpu_options = CpuOptions()
        return self._cpu_options

    @property
    def gpu_options(self) -> GpuOptions:
        if self._gpu_options is None:
            self._gpu_options = GpuOptions()
        return self._gpu_options

    @property
    def qualcomm_options(self) -> QualcommOptions:
        if self._qualcomm_options is None:
            self._qualcomm_options = QualcommOptions()
        return self._qualcomm_options

    @property
    def intel_openvino_options(self) -> IntelOpenVinoOptions:
        if self._intel_openvino_options is None:
            self._intel_openvino_options = IntelOpenVinoOptions()
        return self._intel_openvino_options


def resolve_options(options: Any, hardware_accel: Any) -> Any:
    """LiteRT's rule: ``options`` or ``hardware_accel``, not both; the shortcut (and nothing)
    means that set with one CPU thread."""
    if options is not None:
        if hardware_accel is not None:
            raise UsageError(
                "CompiledModel: pass either options or hardware_accel, not both (found both)"
            )
        return options
    accel = HardwareAccelerator.CPU if hardware_accel is None else hardware_accel
    return Options(hardware_accelerators=accel, cpu_options=CpuOptions(num_threads=1))


_KIND_BITS = (("cpu", 1), ("gpu", 2), ("npu", 4))


def kinds_of(accelerators: Any) -> tuple[str, ...]:
    """The kinds named by a HardwareAccelerator set (LiteRT's, offload's, or its int)."""
    if isinstance(accelerators, bool) or not isinstance(accelerators, int):
        raise UsageError(
            "hardware_accel expects HardwareAccelerator flags (CPU, GPU, NPU, combined with |), "
            f"found {accelerators!r}"
        )
    bits = int(accelerators)
    known = sum(bit for _, bit in _KIND_BITS)
    if bits <= 0 or bits & ~known:
        raise UsageError(
            f"hardware_accel expects a non-empty combination of CPU (1), GPU (2) and NPU (4), "
            f"found {bits}"
        )
    return tuple(kind for kind, bit in _KIND_BITS if bits & bit)


@dataclass
class Translation:
    """What an Options object asks of offload's planner."""

    kinds: tuple[str, ...]
    delegate_kinds: tuple[str, ...]
    reference_allowed: bool
    num_threads: int | None
    precision_loss_allowed: bool
    kind_options: dict[str, dict[str, Any]]
    delegate_options: dict[str, dict[str, Any]]
    unused: list[str]

    def describe(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _group(options: Any, name: str) -> Any:
    """An option group as set, without making one (LiteRT's properties make them on read)."""
    private = "_" + name
    if hasattr(options, private):
        return getattr(options, private)
    return getattr(options, name, None)


def _set_fields(group: Any, defaults: Any, skip: Sequence[str] = ()) -> list[tuple[str, Any]]:
    """The fields of ``group`` that differ from the defaults of its class, by name."""
    found = []
    for f in dataclasses.fields(defaults):
        if f.name in skip:
            continue
        value = getattr(group, f.name, getattr(defaults, f.name))
        if value != getattr(defaults, f.name):
            found.append((f.name, value))
    return found


def translate(options: Any) -> Translation:
    """Read an Options object (offload's or LiteRT's) into the planner's terms."""
    kinds = kinds_of(getattr(options, "hardware_accelerators", None))
    unused: list[str] = []
    kind_options: dict[str, dict[str, Any]] = {"cpu": {"precision_loss_allowed": False}}
    delegate_options: dict[str, dict[str, Any]] = {}
    delegate_kinds = list(kinds)

    cpu = _group(options, "cpu_options")
    num_threads = None
    if cpu is not None:
        threads = getattr(cpu, "num_threads", 0)
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
            raise UsageError(f"CpuOptions.num_threads expects an int >= 0, found {threads!r}")
        num_threads = threads or None
        mode = getattr(cpu, "kernel_mode", None)
        if mode is not None:
            mode = CpuKernelMode(int(mode))
            if mode == CpuKernelMode.REFERENCE and "cpu" in delegate_kinds:
                delegate_kinds.remove("cpu")
            elif mode == CpuKernelMode.BUILTIN:
                delegate_options["litert"] = {"kernels": "builtin"}
        unused += [
            f"cpu_options.{name}={value!r}"
            for name, value in _set_fields(cpu, CpuOptions(), ("num_threads", "kernel_mode"))
        ]

    gpu = _group(options, "gpu_options") or GpuOptions()
    precision_loss = "gpu" in kinds and not bool(getattr(gpu, "enforce_f32", False))
    if "gpu" in kinds:
        kind_options["gpu"] = {"precision_loss_allowed": precision_loss}
    elif getattr(gpu, "enforce_f32", False):
        unused.append("gpu_options.enforce_f32=True (GPU is not in hardware_accel)")
    unused += [
        f"gpu_options.{name}={value!r}"
        for name, value in _set_fields(gpu, GpuOptions(), ("enforce_f32",))
    ]

    openvino = _group(options, "intel_openvino_options")
    if openvino is not None:
        ov: dict[str, Any] = {}
        backend = getattr(openvino, "graph_backend", None)
        if backend is not None:
            ov["device"] = IntelOpenVinoGraphBackend(int(backend)).name
        mode = getattr(openvino, "performance_mode", None)
        if mode is not None:
            mode = IntelOpenVinoPerformanceMode(int(mode))
            if mode == IntelOpenVinoPerformanceMode.CUMULATIVE_THROUGHPUT:
                unused.append(
                    "intel_openvino_options.performance_mode=CUMULATIVE_THROUGHPUT (the "
                    "openvino delegate takes LATENCY or THROUGHPUT)"
                )
            else:
                ov["performance_hint"] = mode.name
        if ov:
            delegate_options["openvino"] = ov
        unused += [
            f"intel_openvino_options.{name}={value!r}"
            for name, value in _set_fields(
                openvino, IntelOpenVinoOptions(), ("graph_backend", "performance_mode")
            )
        ]

    qualcomm = _group(options, "qualcomm_options")
    if qualcomm is not None:
        unused += [
            f"qualcomm_options.{name}={value!r} (no Qualcomm delegate here)"
            for name, value in _set_fields(qualcomm, QualcommOptions())
        ]

    return Translation(
        kinds=kinds,
        delegate_kinds=tuple(delegate_kinds),
        reference_allowed="cpu" in kinds,
        num_threads=num_threads,
        precision_loss_allowed=precision_loss,
        kind_options=kind_options,
        delegate_options=delegate_options,
        unused=unused,
    )

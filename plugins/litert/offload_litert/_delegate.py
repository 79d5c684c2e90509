"""The litert delegate: options, declared capabilities, per-node checks, C delegate libraries.

Every partition is written as a standalone .tflite by ``offload.export_partition`` and run by
LiteRT itself: its ``Interpreter`` on the CPU (XNNPACK or the builtin kernels), or its
``CompiledModel`` on the GPU accelerator. What LiteRT runs is read from LiteRT (_ops).
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import PositiveInt, field_validator

import offload
from offload import (
    Capabilities,
    Delegate,
    DelegateOptions,
    DTypeName,
    ModelType,
    ModelTypeSupport,
    OpCapability,
)
from offload.errors import (
    DelegateOptionsError,
    DelegateUnavailableError,
    IncompatibleOptionError,
)
from offload_litert._engine import IMPORT_ERROR, litert
from offload_litert._library import ENTRY_POINTS, dlopen_message, exports, library_problem
from offload_litert._ops import builtin_versions

__all__ = ["LiteRTDelegate", "LiteRTOptions", "capabilities", "load_library"]

__version__ = "0.1.0"

# Any tensor type: LiteRT checks its own kernels' types when it prepares the partition, and a
# partition it refuses goes back to the CPU reference with the usual warning.
_DTYPES: tuple[DTypeName, ...] = get_args(DTypeName)
_MODEL_TYPES: tuple[ModelType, ...] = ("float32", "float16", "dynamic_range", "int8", "qat")


def capabilities() -> Capabilities:
    """Every builtin op and version the installed LiteRT registers, all five model types."""
    ops = tuple(
        OpCapability(op=op, versions=(1, top), dtypes=_DTYPES)
        for op, top in sorted(builtin_versions().items())
    )
    if litert is None:
        types = dict.fromkeys(_MODEL_TYPES, ModelTypeSupport(support="no", reason=IMPORT_ERROR))
    else:
        types = dict.fromkeys(_MODEL_TYPES, ModelTypeSupport(support="yes"))
    return Capabilities(
        ops=ops,
        model_types=types,
        precisions=("float32", "float16", "int8"),
        # Measured: the CPU reference takes a median 5.2x LiteRT's time on the face models
        # (issue 19; benchmarks/RESULTS.md). The partition overhead stays the default, so
        # "auto" leaves a graph of a few nodes on the CPU.
        expected_speedup=5.0,
    )


_CPU_CAPABILITIES = capabilities()
_GPU_CAPABILITIES = _CPU_CAPABILITIES.model_copy(update={"hardware": "gpu"})


class LiteRTOptions(DelegateOptions):
    """Options of the litert delegate.

    ``num_threads``: LiteRT's threads per partition (1, as LiteRT's Python API).
    ``kernels``: ``"xnnpack"`` (default) LiteRT's default op resolver, which applies XNNPACK as
    LiteRT users run it; ``"builtin"`` its builtin kernels without default delegates
    (``BUILTIN_WITHOUT_DEFAULT_DELEGATES``), bit-exact with offload's CPU reference.
    ``accelerator``: ``"cpu"`` (default) runs partitions in LiteRT's ``Interpreter``; ``"gpu"``
    in its ``CompiledModel`` on the GPU accelerator, ops the GPU does not take staying on
    LiteRT's CPU kernels (``kernels`` chooses which); unavailable, with LiteRT's reason, where
    the accelerator does not start. ``external_delegate_path`` / ``external_delegate_options``:
    a LiteRT C delegate library (.so) and its own options (a mapping, or ``"k1:v1;k2:v2"``):
    one instance of it is made with the delegate, as LiteRT's ``load_delegate`` makes one, and
    LiteRT applies that instance to every partition this delegate runs (CPU only).
    ``precision_loss_allowed``: with the GPU accelerator, let LiteRT compute in float16 (its own
    default where the GPU has it); off, float32 is enforced (``GpuOptions(enforce_f32=True)``):
    on an H100 LiteRT's default differed from its CPU kernels by up to 1.1e-2 relative.
    """

    num_threads: PositiveInt = 1
    kernels: Literal["xnnpack", "builtin"] = "xnnpack"
    accelerator: Literal["cpu", "gpu"] = "cpu"
    precision_loss_allowed: bool = False
    external_delegate_path: str | None = None
    external_delegate_options: dict[str, str] = {}

    @field_validator("external_delegate_options", mode="before")
    @classmethod
    def _library_options(cls, value: Any) -> Any:
        # LiteRT's load_delegate hands every value to the library as text (str(value)), and
        # the command line gives them as LiteRT's --external_delegate_options 'k1:v1;k2:v2'.
        if isinstance(value, str):
            pairs = [item.partition(":") for item in value.split(";") if item.strip()]
            bad = [key for key, sep, _ in pairs if not sep]
            if bad:
                raise ValueError(f"expected 'key:value' items separated by ';', found {bad[0]!r}")
            return {key.strip(): text.strip() for key, _, text in pairs}
        if isinstance(value, Mapping):
            return {str(k): v if isinstance(v, str) else str(v) for k, v in value.items()}
        return value


def _lstm_bias_reason(node: offload.Node, subgraph: offload.Subgraph) -> str | None:
    """Why LiteRT would crash on this LSTM's omitted gate biases, or None.

    LiteRT's LSTM kernels read the forget, cell and output gate biases (inputs 13-15), and the
    input gate's (12) unless the input gate is coupled (CIFG: no input-to-input weights),
    without checking they are there: an omitted one crashed AllocateTensors (found by fuzzing:
    a bias index rewritten to -1). The CPU reference takes a missing bias as zeros.
    """
    if node.op not in ("LSTM", "UNIDIRECTIONAL_SEQUENCE_LSTM") or len(node.inputs) < 16:
        return None
    coupled = node.inputs[1] < 0
    needed = (13, 14, 15) if coupled else (12, 13, 14, 15)
    omitted = [p for p in needed if node.inputs[p] < 0]
    if not omitted:
        return None
    return (
        f"gate bias input(s) {omitted} omitted: LiteRT's LSTM reads them without checking and "
        "crashes; the CPU reference takes them as zeros"
    )


def load_library(path: str, options: Mapping[str, str]) -> Any:
    """One new instance of the C delegate in the library at ``path``, made with ``options``:
    LiteRT's own ``Delegate`` (what its ``load_delegate`` returns), which destroys the instance
    with the library's ``tflite_plugin_destroy_delegate`` when the last reference goes.

    Raises :class:`~offload.errors.DelegateOptionsError` (a ValueError, as LiteRT's
    ``load_delegate`` raises) led by LiteRT's "Failed to load delegate from 'path'" when the
    library cannot be loaded or refuses its options (a NULL from
    ``tflite_plugin_create_delegate``, with the library's message). A file that is not a
    library this process can load, truncated or corrupted ones included, is refused before it
    is opened here, with what was expected and found.
    """
    assert litert is not None
    # LiteRT's words first (its tests match them), the path quoted: it may hold any bytes.
    where = f"Failed to load delegate from {path!r}: delegate 'litert'"
    # A truncated or corrupted library kills the process inside dlopen, where nothing can be
    # caught: it is read and trial-loaded in a child first (once per file, _library).
    problem = library_problem(path)
    if problem is not None:
        raise DelegateOptionsError(f"{where} refused to open it: {problem}")
    # Opened here first: LiteRT's own wrapper, given a file that does not load or lacks the
    # entry points, fails half-built and raises again from its finalizer.
    try:
        handle = ctypes.CDLL(path)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DelegateOptionsError(f"{where} could not open it: {dlopen_message(exc)}") from None
    missing = [name for name in ENTRY_POINTS if not exports(handle, name)]
    if missing:
        raise DelegateOptionsError(
            f"{where} expected a LiteRT external delegate, found a library that does not "
            f"export {' and '.join(missing)}"
        )
    # LiteRT's Delegate, made in two steps so that a failed one is disarmed: its finalizer
    # would otherwise hand the NULL the library returned to tflite_plugin_destroy_delegate.
    native = litert.Delegate.__new__(litert.Delegate)
    try:
        native.__init__(path, dict(options))
    except ValueError as exc:  # LiteRT's: the library returned NULL; its message, if any
        native._library = None
        said = " ".join(str(exc).split())
        raise DelegateOptionsError(
            f"{where} expected a delegate from tflite_plugin_create_delegate with options "
            f"{dict(options)}, found NULL; "
            + (f"the library said: {said}" if said else "the library gave no reason")
        ) from None
    except BaseException:
        native._library = None
        raise
    return native


class LiteRTDelegate(Delegate):
    name = "litert"
    version = __version__
    Options = LiteRTOptions
    CAPABILITIES = _CPU_CAPABILITIES

    def __init__(self, options: Mapping[str, Any] | DelegateOptions | None = None) -> None:
        super().__init__(options)
        opts: LiteRTOptions = self.options
        # The C delegate instance (LiteRT's Delegate) of external_delegate_path, or None.
        self._native: Any = None
        if litert is None:
            return  # unavailable: availability() says why, and nothing here can be checked
        if opts.accelerator == "gpu":
            if opts.external_delegate_path:
                raise DelegateOptionsError(
                    "delegate 'litert': external_delegate_path applies to accelerator='cpu' "
                    "(LiteRT's Interpreter); LiteRT's CompiledModel takes no C delegate"
                )
            from offload_litert._compiled import gpu_unavailable_reason

            reason = gpu_unavailable_reason()
            if reason:
                raise DelegateUnavailableError(
                    f"delegate 'litert' with accelerator='gpu' is unavailable here: {reason}"
                )
        if opts.external_delegate_path:
            # One instance, made now, as LiteRT's load_delegate makes it: a missing library
            # or an option it refuses is an error here, the library parses its options once,
            # and every partition of every interpreter this delegate is given shares it.
            # Each LiteRT Interpreter that applies it holds a reference, so the library
            # destroys it once, after the last of them and this object are gone.
            self._native = load_library(opts.external_delegate_path, opts.external_delegate_options)

    @classmethod
    def availability(cls) -> offload.Availability:
        return offload.Availability(litert is not None, IMPORT_ERROR)

    # -- LiteRT's Delegate surface (interpreter.Delegate), for programs written for LiteRT:
    # testDelegate reads the library's counters through interpreter._delegates[0]._library,
    # and LiteRT's own Interpreter applies this object through _get_native_delegate_pointer.

    @property
    def _library(self) -> Any:
        """The C delegate library (LiteRT's ctypes handle); None without one."""
        return None if self._native is None else self._native._library

    @property
    def _delegate_ptr(self) -> int | None:
        """The library's TfLiteDelegate instance (an address); None without one."""
        return None if self._native is None else self._native._delegate_ptr

    def _get_native_delegate_pointer(self) -> int:
        """The TfLiteDelegate pointer, as LiteRT's Delegate gives it to its Interpreter. Not to
        be kept: the instance lives as long as this object and the interpreters using it."""
        if self._native is None:
            raise IncompatibleOptionError(
                "delegate 'litert' has no native TfLiteDelegate: expected one loaded from a "
                "LiteRT C delegate library (load_delegate('lib.so') or "
                "external_delegate_path), found external_delegate_path unset; an offload "
                "delegate runs in offload.Interpreter, not in LiteRT's"
            )
        pointer: int = self._native._get_native_delegate_pointer()
        return pointer

    @property
    def capabilities(self) -> Capabilities:
        return _GPU_CAPABILITIES if self.options.accelerator == "gpu" else self.CAPABILITIES

    @classmethod
    def options_for_hardware(cls, kind: str) -> dict[str, Any] | None:
        return {"accelerator": kind} if kind in ("cpu", "gpu") else None

    @classmethod
    def auto_variants(cls) -> tuple[dict[str, Any], ...]:
        # LiteRT's builtin kernels are the oracle's own numbers: where XNNPACK's rounding puts
        # a quantized model outside the accuracy policy, auto still has an engine that runs
        # it exactly, at a fraction of the CPU reference's time.
        return ({"kernels": "builtin"},)

    def check_node(self, node: offload.Node, subgraph: offload.Subgraph) -> str | None:
        opts: LiteRTOptions = self.options
        # Only LiteRT's builtin kernels give LiteRT's answer where its integer registers
        # overflow: XNNPACK, the GPU and a C delegate each give their own.
        builtin = (
            opts.kernels == "builtin"
            and opts.accelerator == "cpu"
            and not opts.external_delegate_path
        )
        engine = (
            "LiteRT's builtin kernels"
            if builtin
            else "the C delegate"
            if opts.external_delegate_path
            else f"LiteRT's {'GPU accelerator' if opts.accelerator == 'gpu' else 'XNNPACK'}"
        )
        reason = offload.check_engine_node(
            node, subgraph, engine=engine, state=True, litert_builtin=builtin
        ) or _lstm_bias_reason(node, subgraph)
        if reason is None and self.options.accelerator == "gpu":
            state = [t for t in node.inputs if t >= 0 and subgraph.tensors[t].is_variable]
            if state:
                reason = (
                    f"input tensor {state[0]} is a variable (state), and LiteRT's CompiledModel "
                    "does not load models with variable tensors; use accelerator='cpu'"
                )
        return reason

    def create_kernel(self) -> offload.DelegateKernel:
        if self.options.accelerator == "gpu":
            from offload_litert._compiled import CompiledKernel, gpu_hardware

            return CompiledKernel(self.options, gpu_hardware())
        from offload_litert._kernel import LiteRTKernel

        return LiteRTKernel(self.options, self._native)

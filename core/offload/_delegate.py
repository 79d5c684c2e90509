"""The delegate contract, after LiteRT's SimpleDelegateInterface / SimpleDelegateKernelInterface.

A delegate says what it supports (:class:`~offload.Capabilities`), whether it can run here
(:meth:`Delegate.availability`), and makes one :class:`DelegateKernel` per partition. Required
methods raise ``NotImplementedError``; optional ones have working defaults.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationError,
)

from offload._capabilities import Capabilities, check_node
from offload._deprecation import deprecation, overrides, warn_deprecated
from offload.errors import DelegateOptionsError

if TYPE_CHECKING:
    from offload._graph import Model, Node, Subgraph
    from offload._partition import Partition

__all__ = [
    "Availability",
    "Delegate",
    "DelegateKernel",
    "DelegateOptions",
    "DevicePeak",
    "DeviceProfile",
    "KernelTiming",
]


@dataclass(frozen=True)
class Availability:
    """Whether a delegate can run on this machine, and if not, why (for people to read)."""

    available: bool
    reason: str = ""


class DelegateOptions(BaseModel):
    """Options every delegate accepts. Subclass it to add a delegate's own options.

    ``max_delegated_partitions``: unset keeps every partition; a positive integer keeps that
    many, the largest first. ``min_nodes_per_partition``: smaller partitions go to the CPU.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_delegated_partitions: PositiveInt | None = Field(
        default=None, description="keep at most this many partitions, largest first"
    )
    min_nodes_per_partition: PositiveInt = Field(
        default=1, description="smaller partitions stay on the CPU"
    )


class KernelTiming(BaseModel):
    """Device time of one kernel family in one partition, since profiling was switched on.

    ``family``: what the launches have in common, usually the kernel function's name
    (``matmul_6x2``), or a transfer (``copy to device``) with ``kind="transfer"``.
    ``launches``: enqueues of that family; ``device_ms``: their summed time on the device (from
    the device's own timestamps, not the host's clock); ``flops``: floating-point operations
    they performed (a multiply-add counts 2), 0 where the delegate does not know.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    family: str = Field(min_length=1)
    kind: Literal["kernel", "transfer"] = "kernel"
    launches: NonNegativeInt
    device_ms: NonNegativeFloat
    flops: NonNegativeInt = 0


class DeviceProfile(BaseModel):
    """What :meth:`DelegateKernel.profile` reports: ``invokes`` measured since profiling was
    switched on, each kernel family's totals over them, and the device's name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    invokes: NonNegativeInt
    kernels: tuple[KernelTiming, ...] = ()
    device: str = ""


class DevicePeak(BaseModel):
    """What :meth:`DelegateKernel.device_peak` reports: the roofs of the device a partition
    runs on, for the roofline (``offload benchmark --roofline``). ``gflops``: float32
    multiply-add throughput (a multiply-add counts 2); ``gbps``: memory bandwidth, bytes read
    plus written per second; ``source``: how they were found (``"measured now"``, ``"memo"``,
    a datasheet...)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: str = Field(min_length=1)
    gflops: PositiveFloat
    gbps: PositiveFloat
    source: str = ""


class DelegateKernel:
    """Runs one partition. ``init`` once, ``prepare`` on every shape change, ``invoke`` per run."""

    def init(self, subgraph: Subgraph, partition: Partition) -> None:
        """Compile, upload and transform weights for ``partition``. Called once."""

    def prepare(self, input_shapes: Sequence[tuple[int, ...]]) -> None:
        """React to new input shapes (called after init and after every resize)."""

    def invoke(self, inputs: Sequence[np.ndarray]) -> Sequence[np.ndarray]:
        """Compute ``partition.outputs`` from arrays for ``partition.inputs``, in that order
        (None at a position whose value :meth:`take_input` took).

        Return one array per output, with its tensor's dtype and the shape offload computed
        for it at ``allocate_tensors`` (a numpy scalar stands for a 0-d array). An output whose
        shape only the run settles (computed from values, as a RESHAPE to a computed shape) is
        taken at the shape the kernel gives. Anything else is an error, and the partition goes
        back to the CPU.
        """
        raise NotImplementedError(f"{type(self).__name__} needs invoke()")

    def memory_bytes(self) -> Mapping[str, int]:
        """What this partition holds, for ``Interpreter.memory_report()``: ``{"device": bytes
        of device buffers, "host": bytes of host arrays kept between invokes}``. Optional; the
        default reports nothing (counted as 0, not guessed)."""
        return {}

    def stats(self) -> Mapping[str, Any]:
        """The delegate's own figures for this partition (cache hits, launches), for
        ``Interpreter.delegate_kernel_stats()``. Optional; the default has none."""
        return {}

    def set_profiling(self, enabled: bool) -> bool:
        """Start measuring device time per kernel family from zero (``enabled``), or stop.

        Returns whether this kernel measures now. Optional: the default cannot, and says so.
        Measuring usually costs time per launch (timestamps, a profiling queue), which is why
        it is off until asked for, through ``Interpreter.set_delegate_profiling()``.
        """
        return False

    def profile(self) -> DeviceProfile | Mapping[str, Any] | None:
        """Device time per kernel family since :meth:`set_profiling` switched it on, for
        ``Interpreter.delegate_profile()``: a :class:`DeviceProfile` or a mapping of its
        fields. Optional; None (the default) means no device profile."""
        return None

    def device_peak(self) -> DevicePeak | Mapping[str, Any] | None:
        """The roofs of the device this partition runs on, for the roofline: a
        :class:`DevicePeak` or a mapping of its fields. Optional; None (the default) means the
        partition's own peak is the CPU's, which offload measures itself. Asked only by
        roofline reports, so it may measure the device at its first call (a short
        micro-benchmark); it should remember the answer for the device after that."""
        return None

    def take_input(self, position: int, value: np.ndarray) -> bool:
        """Take a model input straight from ``Interpreter.set_tensor``: copy ``value`` (the
        caller's array, read-only) into the engine as partition input ``position`` now,
        instead of the interpreter copying it into a buffer of its own and ``invoke`` copying
        it again. Return True when taken: until the input is set again, ``invoke`` receives
        None at that position (the value is already in the engine), and the interpreter asks
        :meth:`read_input` for it whenever something else needs it (``get_tensor``, a view,
        the CPU taking the partition over). Return False (the default) and nothing changes.

        Offered only for model inputs this partition alone reads, never for state, and no
        more for a tensor once a view of it (``Interpreter.tensor``) has been handed out. An
        engine whose copy is the one copy LiteRT makes (LiteRT's own ``set_tensor``, an
        OpenVINO input tensor) saves one copy of every input per run this way."""
        return False

    def read_input(self, position: int) -> np.ndarray:
        """The value :meth:`take_input` last took at ``position``, as a new array. Required
        of a kernel whose ``take_input`` returns True."""
        raise NotImplementedError(f"{type(self).__name__} takes inputs but has no read_input()")

    #: Set by a kernel whose ``invoke`` returns new arrays every time and never touches them
    #: again: the interpreter then takes them as they are. Otherwise (the default) it copies
    #: them into buffers of its own, so a kernel that reuses or later writes its output arrays
    #: cannot change what a later node or the user reads.
    fresh_outputs: ClassVar[bool] = False

    def reset_variables(self) -> None:
        """Start the partition's state over, for ``Interpreter.reset_all_variables()``.

        A kernel that keeps state between invokes (the variables of an exported partition
        held by another runtime, an LSTM's state on a device) puts it back to its first value
        here, as LiteRT's ``ResetVariableTensors`` does. Optional; the default does nothing,
        which is right for kernels without state. If it raises, the partition runs on the CPU
        reference from then on, starting from the reset state (an error with
        ``allow_cpu_fallback=False``).
        """


class Delegate:
    """Base class of every delegate, ours and third parties'.

    Subclasses set ``name``, ``CAPABILITIES`` and, if they take options of their own,
    ``Options`` (a :class:`DelegateOptions` subclass); they implement :meth:`create_kernel`.
    """

    name: ClassVar[str] = ""
    version: ClassVar[str] = "0"
    Options: ClassVar[type[DelegateOptions]] = DelegateOptions
    CAPABILITIES: ClassVar[Capabilities]
    #: Deprecated: a delegate that has LiteRT apply C delegate libraries (.so) to its
    #: partitions implements the hook ``offload_native_library_delegate`` instead.
    runs_native_delegates: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The deprecated ways to extend a delegate still work; the plugin's class line is
        # told once what replaces them.
        where = f"{cls.__module__}.{cls.__qualname__}"
        if "identity" in vars(cls):
            warn_deprecated(_IDENTITY, f"{where} overrides it")
        if "is_node_supported" in vars(cls):
            warn_deprecated(_IS_NODE_SUPPORTED, f"{where} overrides it")
        if vars(cls).get("runs_native_delegates") or "for_native_library" in vars(cls):
            warn_deprecated(_NATIVE_LIBRARIES, f"{where} sets or implements them")

    def __init__(self, options: Mapping[str, Any] | DelegateOptions | None = None) -> None:
        self.options = self.parse_options(options)

    @classmethod
    def parse_options(cls, options: Mapping[str, Any] | DelegateOptions | None) -> Any:
        """Validate ``options`` against ``cls.Options``; errors name the delegate and option."""
        if isinstance(options, cls.Options):
            return options
        if isinstance(options, DelegateOptions):
            options = options.model_dump(exclude_unset=True)
        try:
            return cls.Options(**dict(options or {}))
        except ValidationError as exc:
            problems = "; ".join(
                f"option {'.'.join(str(p) for p in err['loc']) or '?'}: {_option_message(err)}"
                for err in exc.errors()
            )
            valid = ", ".join(sorted(cls.Options.model_fields))
            raise DelegateOptionsError(
                f"delegate {cls.name!r} rejected its options: {problems} (valid options: {valid})"
            ) from None

    @classmethod
    def for_native_library(cls, path: str, options: Mapping[str, Any] | None = None) -> Delegate:
        """Deprecated: implement the hook ``offload_native_library_delegate`` instead.

        Still called, for an installed delegate whose class sets ``runs_native_delegates``,
        when no plugin's hook answers for the library at ``path``.
        """
        raise NotImplementedError(f"{cls.__name__} does not run LiteRT C delegate libraries")

    @classmethod
    def options_for_hardware(cls, kind: str) -> dict[str, Any] | None:
        """The options that make this delegate compute on hardware of ``kind`` (``"cpu"``,
        ``"gpu"`` or ``"npu"``), or None where it cannot.

        :class:`offload.CompiledModel` asks this for every kind in its ``hardware_accel`` and
        builds the delegate with the answer (its own options added), then keeps it only if
        ``capabilities.hardware`` of the instance is that kind. The default: no options for
        the kind of ``CAPABILITIES.hardware``, None for the others. Override it where an
        option chooses the device (the litert delegate's ``accelerator``, openvino's
        ``device``).
        """
        return {} if cls.CAPABILITIES.hardware == kind else None

    @classmethod
    def auto_variants(cls) -> Sequence[Mapping[str, Any]]:
        """Option sets ``delegates="auto"`` measures as candidates of their own, beside the
        delegate with the options it would get anyway.

        Declare settings that change speed but are worth weighing on every model: above all
        exact ones (the litert delegate's ``kernels="builtin"``, bit-exact with the CPU
        reference where its default XNNPACK is not), so that auto never falls back to the
        reference while an engine runs the model within the accuracy policy. Each mapping is
        merged over the options auto builds the delegate with (the user's own options for
        the delegate still win); one that comes out the same as another is measured once.
        The default: none.
        """
        return ()

    @classmethod
    def availability(cls) -> Availability:
        """Can this delegate run here? Override to probe hardware or platform."""
        return Availability(True)

    @property
    def capabilities(self) -> Capabilities:
        """What this delegate supports with its current options (defaults to CAPABILITIES)."""
        return self.CAPABILITIES

    def device_identity(self) -> Mapping[str, str]:
        """What this delegate's speed here depends on beyond its version and options: the
        device and driver it would run on (``{"device": "...", "driver": "..."}``).

        ``delegates="auto"`` keeps the plan it measured under a key that includes this, so a
        new device or driver measures again. Called each time a stored decision is looked up
        (a fresh process's ``allocate_tensors``): keep it cheap, and cache what you probe.
        Optional; the default says nothing beyond what the core records itself (the CPU, the
        OpenCL drivers registered, the GPU driver's version, every installed package the
        delegate's distribution requires).
        """
        if overrides(type(self), Delegate, "identity"):
            return self.identity()  # a delegate written before the rename (warned at import)
        return {}

    def identity(self) -> Mapping[str, str]:
        """Deprecated name of :meth:`device_identity`."""
        if overrides(type(self), Delegate, "identity"):
            return {}  # an old override's super().identity(): the default
        warn_deprecated(_IDENTITY)
        return self.device_identity()

    def model_type_reason(self, model: Model) -> str | None:
        """None if the delegate takes models of this type, else the one reason it does not."""
        support = self.capabilities.model_types[model.model_type]
        if support.support == "no":
            detail = f": {support.reason}" if support.reason else ""
            return f"{self.name} does not support {model.model_type} models{detail}"
        return None

    def check_node(self, node: Node, subgraph: Subgraph) -> str | None:
        """The constraints :attr:`capabilities` cannot express: None to take ``node``, else
        the reason it stays on the CPU.

        The one hook for "is this node supported?": called only for nodes the declaration
        takes (op, version, dtypes, shapes, the declared options), so it checks only what is
        particular to the delegate. Optional; the default takes every such node.
        """
        return None

    def is_node_supported(self, node: Node, subgraph: Subgraph) -> str | None:
        """None if this delegate takes ``node``, else the reason it does not: the question the
        planner asks, answered by the declaration, then by :meth:`check_node`.

        Ask it; do not override it (overriding it is deprecated): put a delegate's own limits
        in :meth:`check_node`, and the reason for an op it does not take in
        ``Capabilities.unsupported_ops``.
        """
        caps = self.capabilities
        cap = caps.op(node.op)
        if cap is None and not node.is_custom and node.op in caps.unsupported_ops:
            return f"op {node.op} is not supported: {caps.unsupported_ops[node.op]}"
        reason = check_node(cap, node, subgraph)
        if reason is None:
            reason = self.check_node(node, subgraph)
        return reason

    def create_kernel(self) -> DelegateKernel:
        """A new kernel for one partition."""
        raise NotImplementedError(f"{type(self).__name__} needs create_kernel()")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self.options!r}>"


_IDENTITY = deprecation(
    "Delegate-identity",
    old="Delegate.identity()",
    new="Delegate.device_identity(), which says what it is: the device and driver that key "
    "auto's stored decisions",
    since="0.2.0",
    removal="0.3.0",
)
_IS_NODE_SUPPORTED = deprecation(
    "Delegate-is_node_supported-override",
    old="overriding Delegate.is_node_supported()",
    new="Delegate.check_node(), the one hook for what CAPABILITIES cannot say, and "
    "Capabilities.unsupported_ops for the reason an op is not taken",
    since="0.2.0",
    removal="0.3.0",
)
_NATIVE_LIBRARIES = deprecation(
    "Delegate-native-libraries",
    old="Delegate.runs_native_delegates and Delegate.for_native_library()",
    new="the hook offload_native_library_delegate(library, options), which returns the "
    "delegate that has LiteRT apply the library",
    since="0.2.0",
    removal="0.3.0",
)


def _option_message(err: Mapping[str, Any]) -> str:
    if err.get("type") == "extra_forbidden":
        return "unknown option"
    return f"{err.get('msg')} (found {err.get('input')!r})"

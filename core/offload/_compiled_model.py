"""LiteRT 2.x's ``CompiledModel`` API over offload's planner, delegates and CPU reference.

A program written for ``ai_edge_litert.compiled_model`` runs unchanged with ``from offload
import CompiledModel``. The program names kinds of hardware (``HardwareAccelerator.CPU | GPU |
NPU``); offload plans with the installed delegates of those kinds (``Capabilities.hardware``),
measures them as ``delegates="auto"`` does when there are several (the choice is remembered),
and runs what none takes on the CPU reference where CPU is in the set.

Compilation is ``from_file`` / ``from_buffer``: planning, the choice and allocation happen
there, as LiteRT compiles there. ``run_by_index`` / ``run_by_name`` then only bind the input
buffers (no copy: a buffer made by ``create_input_buffers`` holds the array the model reads),
invoke, and copy each output into its buffer.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from offload._compiled_options import (
    HardwareAccelerator,
    Options,
    Translation,
    resolve_options,
    translate,
)
from offload._executor import Executor
from offload._formatting import wrap_text
from offload._graph import Model
from offload._interpreter import Interpreter, interpreter_over
from offload._loader import load_model
from offload._plan_report import fallback_rows
from offload._report_text import fallback_lines
from offload._session import Session
from offload._settings import AutoSettings, budget_from
from offload._shape_pass import DEFAULT_MAX_TENSOR_BYTES
from offload._signature_runner import check_signature
from offload._tensor_buffer import (
    DTYPE_NAMES,
    HOST_MEMORY,
    Environment,
    TensorBuffer,
    bound_array,
    check_writable,
)
from offload.errors import (
    CpuFallbackError,
    InterpreterStateError,
    NoTensorValueError,
    SignatureError,
    TensorShapeError,
    UsageError,
)

__all__ = ["PLACEHOLDER_SIGNATURE", "CompiledModel"]

# LiteRT's key for the one signature of a model that declares none.
PLACEHOLDER_SIGNATURE = "<placeholder signature>"
# -- the compiled model --------------------------------------------------------------------------


@dataclass
class _Signature:
    key: str
    subgraph_index: int
    inputs: list[tuple[str, int]]  # (name, tensor index), in the signature's order
    outputs: list[tuple[str, int]]


@dataclass
class _Compiled:
    """Everything a CompiledModel holds: the session it plans and runs with, its signatures,
    and how its options were read."""

    session: Session
    signatures: list[_Signature]
    translation: Translation
    interpreter: Interpreter | None = None

    def executor(self, sig: _Signature) -> Executor:
        return self.session.executor_for(sig.subgraph_index)


def _signatures(model: Model) -> list[_Signature]:
    if not model.signatures:
        main = model.main
        return [
            _Signature(
                PLACEHOLDER_SIGNATURE,
                0,
                [(main.tensors[t].name, t) for t in main.inputs],
                [(main.tensors[t].name, t) for t in main.outputs],
            )
        ]
    # Every signature is checked here, at load, as LiteRT's CompiledModel refuses a model with
    # a signature out of range: the calls below index tensor tables with what they hold.
    for s in model.signatures:
        check_signature(model, s)
    return [
        _Signature(s.key, s.subgraph_index, list(s.inputs.items()), list(s.outputs.items()))
        for s in model.signatures
    ]


def _not_accelerated(session: Session, translation: Translation) -> CpuFallbackError:
    """LiteRT's error for a node no accelerator of the set takes, with offload's reasons: what
    each candidate of the set said of those nodes when auto planned it (the chosen plan alone
    names only the delegates it uses)."""
    plan = session.plan()
    refusals = session.selection.refusals
    untaken = [n for n in plan.fallback_nodes() if all(n in r for r in refusals.values())]
    lines = fallback_lines(fallback_rows(plan, refusals, untaken))
    if not refusals:
        lines.append("  no delegate of these kinds is installed")
    elif not untaken:
        # Every node has a taker, yet no candidate ran and agreed with the CPU reference.
        lines.extend(
            wrap_text(f"{c['label']}: {c['status']}: {c['reason']}", "  ")
            for c in (session.selection.summary or {}).get("candidates", [])
            if c.get("reason") and c["status"] != "chosen"
        )
    skipped = (session.selection.summary or {}).get("skipped", [])
    # Once per delegate and reason: each option set of a delegate (auto_variants) says it.
    for name, reason in dict.fromkeys((row["delegate"], row["reason"]) for row in skipped):
        lines.append(wrap_text(f"delegate {name}: {reason}", "  "))
    kinds = " | ".join(k.upper() for k in translation.kinds)
    what = (
        f"{len(untaken)} node(s) are taken by no delegate of hardware_accel={kinds}"
        if untaken or not refusals
        else f"no candidate of hardware_accel={kinds} ran and agreed with the CPU reference"
    )
    return CpuFallbackError(
        "Some ops are not accelerated. Add kLiteRtHwAcceleratorCpu to the compilation "
        f"accelerator set to allow using the CPU to run those. offload: {what}:\n"
        + "\n".join(lines)
    )


def _compile(
    model_path: str | os.PathLike[str] | None,
    model_content: bytes | None,
    hardware_accel: Any,
    options: Any,
    auto_inputs: Sequence[Any] | None = None,
) -> _Compiled:
    translation = translate(resolve_options(options, hardware_accel))
    if translation.unused:
        warnings.warn(
            "CompiledModel: options with no counterpart in offload's delegates are kept and "
            f"unused: {', '.join(translation.unused)} (delegation_report()['compiled_model'])",
            UserWarning,
            stacklevel=3,
        )
    model = load_model(model_path=model_path, model_content=model_content)
    signatures = _signatures(model)  # checked before any time goes into choosing
    settings = AutoSettings(
        budget_s=budget_from(None),
        precision_loss_allowed=translation.precision_loss_allowed,
        num_threads=translation.num_threads,
        allow_cpu_fallback=translation.reference_allowed,
        hardware=translation.delegate_kinds,
        reference_allowed=translation.reference_allowed,
        kind_options=translation.kind_options,
        delegate_options=translation.delegate_options,
        max_tensor_bytes=DEFAULT_MAX_TENSOR_BYTES,
        samples=auto_inputs,
    )
    session = Session(model, model_path, settings, delegates="auto")
    session.resolve()
    session.executor.allocate()
    if not translation.reference_allowed and session.plan().fallback_nodes():
        raise _not_accelerated(session, translation)
    return _Compiled(session, signatures, translation)


class CompiledModel:
    """A model compiled for kinds of hardware: LiteRT 2.x's ``CompiledModel``, over offload.

    Made by :meth:`from_file` or :meth:`from_buffer` with ``hardware_accel`` (a
    :class:`HardwareAccelerator` set; CPU by default, with one thread, as LiteRT) or
    ``options`` (:class:`Options`: the set, ``CpuOptions``, ``GpuOptions`` and vendor options).
    offload plans with the installed delegates whose ``Capabilities.hardware`` is in the set,
    chooses among several by measuring them as ``delegates="auto"`` does (within
    ``$OFFLOAD_AUTO_BUDGET_S``, remembered in the auto cache), and runs the rest on the CPU
    reference when CPU is in the set; without CPU, a node none takes raises
    :class:`~offload.errors.CpuFallbackError` with LiteRT's message and offload's reason per
    node. :meth:`delegation_report` says what runs where and why.
    """

    def __init__(self, c_model_ptr: Any, environment: Any) -> None:
        if not isinstance(c_model_ptr, _Compiled):
            raise UsageError(
                "CompiledModel is made by CompiledModel.from_file or from_buffer, found a "
                f"{type(c_model_ptr).__name__}"
            )
        self._model: _Compiled | None = c_model_ptr
        self._environment = environment

    def __enter__(self) -> CompiledModel:
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        self.close()

    def close(self) -> None:
        """Release the model; any later call raises InterpreterStateError."""
        self._model = None

    @classmethod
    def from_file(
        cls,
        model_path: str,
        hardware_accel: HardwareAccelerator | None = None,
        environment: Environment | None = None,
        options: Options | None = None,
        *,
        auto_inputs: Sequence[Any] | None = None,
    ) -> CompiledModel:
        """``auto_inputs`` (offload's): the program's own inputs for the accuracy check of
        the choice among delegates, as ``Interpreter(auto_inputs=...)`` takes them."""
        compiled = _compile(model_path, None, hardware_accel, options, auto_inputs)
        return cls(compiled, environment or Environment.create())

    @classmethod
    def from_buffer(
        cls,
        model_data: bytes,
        hardware_accel: HardwareAccelerator | None = None,
        environment: Environment | None = None,
        options: Options | None = None,
        *,
        auto_inputs: Sequence[Any] | None = None,
    ) -> CompiledModel:
        """``auto_inputs``: as :meth:`from_file` takes it."""
        compiled = _compile(None, model_data, hardware_accel, options, auto_inputs)
        return cls(compiled, environment or Environment.create())

    @property
    def environment(self) -> Any:
        return self._environment

    # -- signatures ---------------------------------------------------------------------------

    def _state(self) -> _Compiled:
        if self._model is None:
            raise InterpreterStateError("the CompiledModel is closed")
        return self._model

    def _signature(self, index: int) -> _Signature:
        sigs = self._state().signatures
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise SignatureError(
                f"expected a signature index in 0..{len(sigs) - 1}, found {index!r}"
            )
        if not 0 <= index < len(sigs):
            raise SignatureError(
                f"signature index {index} is out of range: the model has {len(sigs)} "
                f"signature(s) ({[s.key for s in sigs]})"
            )
        return sigs[int(index)]

    def _signature_by_key(self, key: str) -> _Signature:
        sigs = self._state().signatures
        index = self.get_signature_index(key)
        if index < 0:
            raise SignatureError(
                f"Signature not found: {key!r}; the model has {[s.key for s in sigs]}"
            )
        return sigs[index]

    def get_signature_list(self) -> dict[str, dict[str, list[str]]]:
        return {
            s.key: {"inputs": [n for n, _ in s.inputs], "outputs": [n for n, _ in s.outputs]}
            for s in self._state().signatures
        }

    def get_signature_by_index(self, index: int) -> dict[str, Any]:
        s = self._signature(index)
        return {
            "key": s.key,
            "inputs": [n for n, _ in s.inputs],
            "outputs": [n for n, _ in s.outputs],
        }

    def get_num_signatures(self) -> int:
        return len(self._state().signatures)

    def get_signature_index(self, key: str) -> int:
        """The signature's index, -1 where there is none, as LiteRT 2.3: the placeholder key
        of a model without signatures is 0, and so is the empty key in any model (LiteRT's
        ``GetSignatureIndex`` takes "" for the first signature, so every call that names a
        signature by key does)."""
        sigs = self._state().signatures
        if key == "":
            return 0
        for i, sig in enumerate(sigs):
            if sig.key == key:
                return i
        return -1

    def _tensor_details(self, sig: _Signature, pairs: list[tuple[str, int]]) -> dict[str, Any]:
        ex = self._state().executor(sig)
        details = {}
        for name, t in pairs:
            tensor = ex.subgraph.tensors[t]
            details[name] = {
                "name": tensor.name,
                "index": t,
                "dtype": DTYPE_NAMES.get(np.dtype(tensor.dtype), str(tensor.dtype)),
                "shape": [int(d) for d in ex.shapes[t]],
            }
        return details

    def get_input_tensor_details(self, signature_key: str) -> dict[str, Any]:
        sig = self._signature_by_key(signature_key)
        return self._tensor_details(sig, sig.inputs)

    def get_output_tensor_details(self, signature_key: str) -> dict[str, Any]:
        sig = self._signature_by_key(signature_key)
        self._allocated(sig)  # output shapes follow a resized input
        return self._tensor_details(sig, sig.outputs)

    def _requirements(self, sig: _Signature, pairs: list[tuple[str, int]], i: int) -> dict:
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not 0 <= i < len(pairs):
            raise SignatureError(
                f"expected an index in 0..{len(pairs) - 1} of signature {sig.key!r}, found {i!r}"
            )
        ex = self._allocated(sig)
        t = pairs[int(i)][1]
        itemsize = np.dtype(ex.subgraph.tensors[t].dtype).itemsize
        return {
            "buffer_size": int(math.prod(ex.shapes[t])) * itemsize,
            "supported_types": [HOST_MEMORY],
        }

    def get_input_buffer_requirements(
        self, input_index: int, signature_index: int = 0
    ) -> dict[str, Any]:
        sig = self._signature(signature_index)
        return self._requirements(sig, sig.inputs, input_index)

    def get_output_buffer_requirements(
        self, output_index: int, signature_index: int = 0
    ) -> dict[str, Any]:
        sig = self._signature(signature_index)
        return self._requirements(sig, sig.outputs, output_index)

    def is_fully_accelerated(self) -> bool:
        """True when every node of every signature's subgraph runs in a delegate, none on the
        CPU reference (LiteRT: every op on an accelerator of the set, XNNPACK counting)."""
        state = self._state()
        return all(not state.executor(s).planned().fallback_nodes() for s in state.signatures)

    # -- buffers ------------------------------------------------------------------------------

    def _allocated(self, sig: _Signature) -> Executor:
        ex = self._state().executor(sig)
        if not ex.allocated:
            if not ex.busy.acquire(blocking=False):
                raise InterpreterStateError(
                    "a CompiledModel runs one call at a time: another thread is inside one"
                )
            try:
                ex.allocate()
            finally:
                ex.busy.release()
        return ex

    def _buffer(self, ex: Executor, t: int) -> TensorBuffer:
        tensor = ex.subgraph.tensors[t]
        array = np.zeros(ex.shapes[t], dtype=tensor.dtype)
        return TensorBuffer(array, self._environment)

    def _input_buffer(self, ex: Executor, t: int) -> TensorBuffer:
        # The array the model reads: write() then run copies once.
        buf = self._buffer(ex, t)
        ex.buffers[t] = buf.capsule  # the host array itself, as LiteRT's capsule is
        return buf

    def _named(self, pairs: list[tuple[str, int]], name: str, sig: _Signature, what: str) -> int:
        for n, t in pairs:
            if n == name:
                return t
        raise SignatureError(
            f"signature {sig.key!r} has no {what} {name!r}; its {what}s are {[n for n, _ in pairs]}"
        )

    def create_input_buffer_by_name(self, signature_key: str, input_name: str) -> TensorBuffer:
        sig = self._signature_by_key(signature_key)
        t = self._named(sig.inputs, input_name, sig, "input")
        return self._input_buffer(self._allocated(sig), t)

    def create_output_buffer_by_name(self, signature_key: str, output_name: str) -> TensorBuffer:
        sig = self._signature_by_key(signature_key)
        t = self._named(sig.outputs, output_name, sig, "output")
        return self._buffer(self._allocated(sig), t)

    def create_input_buffers(self, signature_index: int) -> list[TensorBuffer]:
        sig = self._signature(signature_index)
        ex = self._allocated(sig)
        return [self._input_buffer(ex, t) for _, t in sig.inputs]

    def create_output_buffers(self, signature_index: int) -> list[TensorBuffer]:
        sig = self._signature(signature_index)
        ex = self._allocated(sig)
        return [self._buffer(ex, t) for _, t in sig.outputs]

    # -- resizing -----------------------------------------------------------------------------

    def resize_input_tensor(
        self,
        input_index: int,
        dims: Sequence[int],
        signature_index: int = 0,
        strict: bool = True,
    ) -> None:
        """Give input ``input_index`` of the signature new dimensions; buffers made before
        keep the old size (make new ones). ``strict`` lets only the dimensions that are -1 in
        the model's shape signature change, as LiteRT's strict resize."""
        sig = self._signature(signature_index)
        if (
            isinstance(input_index, bool)
            or not isinstance(input_index, (int, np.integer))
            or not 0 <= input_index < len(sig.inputs)
        ):
            raise SignatureError(
                f"expected an input index in 0..{len(sig.inputs) - 1} of signature "
                f"{sig.key!r}, found {input_index!r}"
            )
        t = sig.inputs[int(input_index)][1]
        ex = self._state().executor(sig)
        tensor = ex.subgraph.tensors[t]
        try:
            shape = tuple(int(d) for d in dims)
        except (TypeError, ValueError):
            raise TensorShapeError(
                f"resize of input {sig.inputs[int(input_index)][0]!r}: expected a sequence of "
                f"ints, found {dims!r}"
            ) from None
        if len(shape) != len(tensor.shape) or any(d < 0 for d in shape):
            raise TensorShapeError(
                f"resize of input {tensor.name!r}: expected {len(tensor.shape)} non-negative "
                f"dimensions, found {list(shape)}"
            )
        if strict:
            fixed = [
                i
                for i, (want, got) in enumerate(zip(tensor.shape_signature, shape))
                if want != -1 and want != got
            ]
            if fixed:
                raise TensorShapeError(
                    f"strict resize of input {tensor.name!r}: only dimensions that are -1 in "
                    f"its shape signature {list(tensor.shape_signature)} may change, found "
                    f"{list(shape)}; pass strict=False to resize the others"
                )
        if shape != tuple(ex.shapes[t]):
            ex.shapes[t] = shape
            ex.allocated = False

    def resize_input_tensor_by_name(
        self,
        signature_key: str,
        input_name: str,
        dims: Sequence[int],
        strict: bool = True,
    ) -> None:
        keys = [s.key for s in self._state().signatures]
        if signature_key not in keys:
            # LiteRT's Python checks the key itself here, so "" is refused where the calls
            # that go to its C++ lookup take it for the first signature.
            raise SignatureError(f"Signature not found: {signature_key!r}; the model has {keys}")
        sig = self._signature_by_key(signature_key)
        index = [n for n, _ in sig.inputs].index(self._name_of(sig, input_name))
        self.resize_input_tensor(index, dims, self._state().signatures.index(sig), strict)

    def _name_of(self, sig: _Signature, name: str) -> str:
        self._named(sig.inputs, name, sig, "input")
        return name

    # -- running ------------------------------------------------------------------------------

    def run_by_name(
        self,
        signature_key: str,
        input_map: Mapping[str, TensorBuffer],
        output_map: Mapping[str, TensorBuffer],
    ) -> None:
        sig = self._signature_by_key(signature_key)
        for what, pairs, given in (
            ("input", sig.inputs, input_map),
            ("output", sig.outputs, output_map),
        ):
            if not isinstance(given, Mapping) or set(given) != {n for n, _ in pairs}:
                found = sorted(given) if isinstance(given, Mapping) else type(given).__name__
                raise SignatureError(
                    f"run_by_name({signature_key!r}): expected {what} buffers for "
                    f"{[n for n, _ in pairs]}, found {found}"
                )
        self._run(
            sig, [input_map[n] for n, _ in sig.inputs], [output_map[n] for n, _ in sig.outputs]
        )

    def run_by_index(
        self,
        signature_index: int,
        input_buffers: Sequence[TensorBuffer],
        output_buffers: Sequence[TensorBuffer],
    ) -> None:
        sig = self._signature(signature_index)
        for what, pairs, given in (
            ("input", sig.inputs, input_buffers),
            ("output", sig.outputs, output_buffers),
        ):
            if not isinstance(given, Sequence) or len(given) != len(pairs):
                found = len(given) if isinstance(given, Sequence) else type(given).__name__
                raise SignatureError(
                    f"run_by_index({signature_index}): signature {sig.key!r} has {len(pairs)} "
                    f"{what}(s) {[n for n, _ in pairs]}, found {found} buffer(s)"
                )
        self._run(sig, input_buffers, output_buffers)

    def _run(
        self, sig: _Signature, inputs: Sequence[TensorBuffer], outputs: Sequence[TensorBuffer]
    ) -> None:
        ex = self._allocated(sig)
        arrays = [bound_array(ex, t, b, n, "input") for (n, t), b in zip(sig.inputs, inputs)]
        targets = [bound_array(ex, t, b, n, "output") for (n, t), b in zip(sig.outputs, outputs)]
        check_writable(ex, sig, arrays, targets)
        if not ex.busy.acquire(blocking=False):
            raise InterpreterStateError(
                "a CompiledModel runs one call at a time: another thread is inside one"
            )
        try:
            for (_, t), array in zip(sig.inputs, arrays):
                ex.buffers[t] = array
            ex.invoke()
            for (name, t), target in zip(sig.outputs, targets):
                value = ex.buffers[t]
                if value is None:  # a signature output that is an intermediate, freed
                    raise NoTensorValueError(
                        f"signature {sig.key!r} output {name!r} is tensor {t} "
                        f"({ex.subgraph.tensors[t].name!r}), an intermediate, which has no "
                        "value after the run: expected an output of the subgraph"
                    )
                if value.size != target.size:  # a shape only this run's values decided
                    raise TensorShapeError(
                        f"output {name!r}: this run gave shape {list(value.shape)} "
                        f"({value.size} elements), its buffer holds {target.size}; make the "
                        "output buffers again after this run"
                    )
                target.reshape(-1)[...] = value.reshape(-1)
        finally:
            ex.busy.release()

    # -- offload's additions ------------------------------------------------------------------

    def delegation_report(self) -> dict[str, Any]:
        """The interpreter's report (per delegate: nodes, partitions, reasons; the choice and
        its figures), with ``compiled_model``: the hardware asked for, the kinds delegates were
        taken from, and the options kept but unused."""
        state = self._state()
        report = state.session.delegation_report()
        t = state.translation
        report["compiled_model"] = {
            "hardware_accel": [k.upper() for k in t.kinds],
            "delegate_kinds": [k.upper() for k in t.delegate_kinds],
            "cpu_reference_allowed": t.reference_allowed,
            "fully_accelerated": self.is_fully_accelerated(),
            "unused_options": list(t.unused),
        }
        return report

    @property
    def interpreter(self) -> Interpreter:
        """The offload Interpreter behind this model (its plan, reports and profiles)."""
        state = self._state()
        if state.interpreter is None:
            state.interpreter = interpreter_over(state.session)
        return state.interpreter

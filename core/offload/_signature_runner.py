"""Signatures: the check of a signature against its model, and LiteRT's ``SignatureRunner``
over an executor; with the one-call-at-a-time guard the Interpreter's calls share."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from offload._executor import Executor
from offload._graph import Model, SignatureDef, Subgraph
from offload._litert_compat import compress_zero_points, litert_message
from offload._tensor_details import tensor_details
from offload._tensor_values import checked_input
from offload.errors import InterpreterStateError, InvalidSignatureError, NoTensorValueError

if TYPE_CHECKING:
    from offload._interpreter import Interpreter

__all__ = ["SignatureRunner", "busy_error", "check_signature", "exclusive", "signature_named"]


def busy_error(call: str) -> InterpreterStateError:
    return InterpreterStateError(
        f"{call} was called while another thread is inside a call on this Interpreter; "
        "an Interpreter runs one call at a time: use one Interpreter per thread"
    )


def check_signature(model: Model, sig: SignatureDef) -> Subgraph:
    """The subgraph ``sig`` runs, once every index it holds is checked against ``model``.

    The loader keeps signatures as the file writes them, since LiteRT loads such a model and
    runs its main subgraph; a signature is checked where it is used (a runner, a
    CompiledModel), before one of its indices reaches a tensor table. An input that an op
    writes is refused too: the value given would be overwritten by that op, and the call
    would return a result computed without it.
    """
    count = len(model.subgraphs)
    if not 0 <= sig.subgraph_index < count:
        raise InvalidSignatureError(
            f"signature {sig.key!r} runs subgraph {sig.subgraph_index}, which the model does "
            f"not have: expected a subgraph index in 0..{count - 1}"
        )
    sg = model.subgraphs[sig.subgraph_index]
    for kind, tensors in (("input", sig.inputs), ("output", sig.outputs)):
        for name, index in tensors.items():
            if not 0 <= index < len(sg.tensors):
                raise InvalidSignatureError(
                    f"signature {sig.key!r} {kind} {name!r} is tensor {index}, which subgraph "
                    f"{sg.index} does not have: expected a tensor index in "
                    f"0..{len(sg.tensors) - 1}"
                )
    producers = sg.producers()
    for name, index in sig.inputs.items():
        if index in producers:
            raise InvalidSignatureError(
                f"signature {sig.key!r} input {name!r} is tensor {index} "
                f"({sg.tensors[index].name!r}) of subgraph {sg.index}, which "
                f"{sg.nodes[producers[index]].describe()} writes: expected a tensor no op "
                "writes (an input of the subgraph)"
            )
    return sg


def signature_named(model: Model, key: str | None) -> SignatureDef:
    """The signature ``key`` names (None: the only one), else LiteRT's ValueError."""
    sigs = {s.key: s for s in model.signatures}
    if key is None:
        if len(sigs) != 1:
            raise ValueError(
                litert_message(
                    "signature_key_none",
                    f"signature_key is required when the model has {len(sigs)} "
                    f"signatures ({sorted(sigs)})",
                    count=len(sigs),
                )
            )
        key = next(iter(sigs))
    if key not in sigs:
        raise ValueError(
            litert_message(
                "signature_key",
                f"no signature {key!r}; the model has {sorted(sigs) or 'none'}",
                key=key,
            )
        )
    return sigs[key]


@contextlib.contextmanager
def exclusive(executor: Executor, call: str) -> Iterator[None]:
    """Hold ``executor`` for one call; a second thread gets a typed error instead of waiting.

    ``invoke`` and ``set_tensor``, called once per inference, take the lock inline instead:
    the generator behind a context manager costs more than a small model's whole step list
    through an engine delegate (1.3 us of ~10 us of overhead, measured).
    """
    if not executor.busy.acquire(blocking=False):
        raise busy_error(call)
    try:
        yield
    finally:
        executor.busy.release()


class SignatureRunner:
    """Runs one signature: ``runner(**inputs) -> {output_name: array}`` (LiteRT's API).

    Made by :meth:`Interpreter.get_signature_runner`, or as in LiteRT by
    ``SignatureRunner(interpreter, signature_key)``; both give a runner over the same state.
    """

    _signature: Any
    _executor: Executor
    _compress: bool

    def __init__(
        self, interpreter: Interpreter | None = None, signature_key: str | None = None
    ) -> None:
        if interpreter is None:
            raise ValueError(
                litert_message("runner_interpreter", "SignatureRunner expects an Interpreter")
            )
        if not signature_key:
            raise ValueError(
                litert_message(
                    "runner_key",
                    f"SignatureRunner expects a signature_key, found {signature_key!r}",
                )
            )
        bound = interpreter.get_signature_runner(signature_key)
        self._signature, self._executor = bound._signature, bound._executor
        self._compress = bound._compress

    @classmethod
    def _bound(cls, signature: Any, executor: Executor, compress: bool) -> SignatureRunner:
        runner = cls.__new__(cls)
        runner._signature, runner._executor, runner._compress = signature, executor, compress
        return runner

    def _details(self, index: int) -> dict[str, Any]:
        ex = self._executor
        details = tensor_details(ex.subgraph.tensors[index], ex.shapes[index])
        return compress_zero_points(details) if self._compress else details

    def get_input_details(self) -> dict[str, dict[str, Any]]:
        return {name: self._details(i) for name, i in self._signature.inputs.items()}

    def get_output_details(self) -> dict[str, dict[str, Any]]:
        return {name: self._details(i) for name, i in self._signature.outputs.items()}

    def __call__(self, **inputs: Any) -> dict[str, np.ndarray]:
        with exclusive(self._executor, "a signature runner call"):
            return self._call(inputs)

    def _call(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        ex = self._executor
        expected = set(self._signature.inputs)
        if set(inputs) != expected:
            detail = (
                f"signature {self._signature.key!r} expects inputs {sorted(expected)}, "
                f"found {sorted(inputs)}"
            )
            if len(inputs) != len(expected):
                detail = litert_message(
                    "signature_inputs", detail, expected=len(expected), found=len(inputs)
                )
            raise ValueError(detail)
        resized = False
        values: dict[str, np.ndarray] = {}
        for name, value in inputs.items():
            index = self._signature.inputs[name]
            t = ex.subgraph.tensors[index]
            # The shape checked is the value's own: a runner resizes to what it is given.
            value = np.asarray(value) if t.type_name != "STRING" else value
            shape = np.shape(value)
            values[name] = value = checked_input(t, value, shape, f"signature input {name!r}")
            if tuple(value.shape) != ex.shapes[index]:
                ex.shapes[index] = tuple(value.shape)
                resized = True
        if resized or not ex.allocated:
            ex.allocate()
        for name, value in values.items():
            ex.handed.pop(self._signature.inputs[name], None)
            ex.buffers[self._signature.inputs[name]] = np.array(value, copy=True)
        ex.invoke()
        outputs: dict[str, np.ndarray] = {}
        for name, i in self._signature.outputs.items():
            buf = ex.buffers[i]
            if buf is None:  # an output that is an intermediate, freed after its last use
                raise NoTensorValueError(
                    f"signature {self._signature.key!r} output {name!r} is tensor {i} "
                    f"({ex.subgraph.tensors[i].name!r}), which has no value after the run: "
                    "intermediates are freed after their last use; create the Interpreter "
                    "with experimental_preserve_all_tensors=True to keep them"
                )
            outputs[name] = np.array(buf, copy=True)
        return outputs

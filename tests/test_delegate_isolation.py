"""A delegate kernel cannot change what the interpreter holds behind its back (issue 25): its
inputs are read-only views (state excepted), and its outputs are taken into arrays the
interpreter owns, as base ndarrays."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np
import pytest

import offload
from offload import Capabilities, Delegate, DelegateKernel, ModelTypeSupport, OpCapability
from offload.errors import DelegateError
from offload.model.builder import ModelBuilder

from ._models import add_then_exp_model

ALL_YES = {
    t: ModelTypeSupport(support="yes")
    for t in ("float32", "float16", "dynamic_range", "int8", "qat")
}
X = np.arange(6, dtype=np.float32).reshape(1, 6) - 2.5


def _model() -> bytes:
    return add_then_exp_model()


def _delegate(invoke: Callable[[Sequence[np.ndarray]], list[np.ndarray]]) -> Delegate:
    class Kernel(DelegateKernel):
        def init(self, subgraph, partition) -> None:  # noqa: ANN001
            pass

        def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
            return invoke(inputs)

    class Adds(Delegate):
        name = "adds"
        CAPABILITIES = Capabilities(ops=(OpCapability(op="ADD"),), model_types=ALL_YES)

        def create_kernel(self) -> DelegateKernel:
            return Kernel()

    return Adds()


def _run(delegate: Delegate, **kwargs: object) -> tuple[offload.Interpreter, np.ndarray]:
    interp = offload.Interpreter(
        model_content=_model(),
        experimental_delegates=[delegate],
        experimental_preserve_all_tensors=True,
        **kwargs,
    )
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], X)
    interp.invoke()
    return interp, interp.get_tensor(interp.get_output_details()[0]["index"])


def _expected() -> np.ndarray:
    """The CPU reference's answer (its EXP is the C library's expf, not numpy's)."""
    interp = offload.Interpreter(model_content=_model(), delegates=[])
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], X)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


def test_a_kernel_writing_into_its_input_fails_and_its_partition_runs_on_the_cpu() -> None:
    """Writing into an input array is a delegate failure: the user's input tensor and the
    results stay the reference's, with the usual warning."""

    def scribble(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        inputs[0][...] = 100.0
        return [inputs[0] + inputs[0]]

    with pytest.warns(UserWarning, match="failed in invoke.*read-only"):
        interp, found = _run(_delegate(scribble))
    np.testing.assert_array_equal(found, _expected())
    x = interp.get_input_details()[0]["index"]
    np.testing.assert_array_equal(interp.get_tensor(x), X)
    b = ModelBuilder()
    x = b.add_input("x", (1, 6))
    y = b.add_tensor("y", (1, 6))
    b.add_operator("ADD", [x, x], [y])
    b.add_output(y)
    strict = offload.Interpreter(
        model_content=b.build(),
        experimental_delegates=[_delegate(scribble)],
        allow_cpu_fallback=False,
    )
    strict.allocate_tensors()
    strict.set_tensor(strict.get_input_details()[0]["index"], X)
    with pytest.raises(DelegateError, match="read-only"):
        strict.invoke()


def test_a_kernel_cannot_unlock_its_input() -> None:
    """numpy lets a plain read-only view be made writable again; the views a kernel gets
    refuse it, so unlocking fails like writing does, and the user's input stays as set."""

    def unlock(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        inputs[0].flags.writeable = True
        inputs[0][...] = 100.0
        return [inputs[0] + inputs[0]]

    with pytest.warns(UserWarning, match="failed in invoke.*WRITEABLE"):
        interp, found = _run(_delegate(unlock))
    np.testing.assert_array_equal(found, _expected())
    np.testing.assert_array_equal(interp.get_tensor(interp.get_input_details()[0]["index"]), X)


def test_an_ndarray_subclass_is_taken_as_a_plain_array() -> None:
    """np.matrix keeps two dimensions through a reshape; the interpreter takes the values as
    a base ndarray, so the RESHAPE after the delegate gives the declared [6]."""
    _, found = _run(_delegate(lambda inputs: [np.asmatrix(inputs[0] + inputs[0])]))
    assert type(found) is np.ndarray and found.shape == (6,)
    np.testing.assert_array_equal(found, _expected())


def test_a_kernel_writing_its_output_after_invoke_does_not_reach_the_user() -> None:
    """A kernel that keeps its output array and writes it later changes nothing the
    interpreter holds."""
    kept: list[np.ndarray] = []

    def keep(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        out = inputs[0] + inputs[0]
        kept.append(out)
        return [out]

    interp, found = _run(_delegate(keep))
    kept[0][...] = -7.0
    a = 1  # tensor "a", the delegate's output (kept: the model's tensors are preserved)
    np.testing.assert_array_equal(
        interp.get_tensor(a), X + X, err_msg="the kernel's later write leaked"
    )
    np.testing.assert_array_equal(found, _expected())


def test_fresh_outputs_are_taken_as_they_are() -> None:
    """A kernel declaring fresh_outputs is trusted: its arrays are not copied."""
    returned: list[np.ndarray] = []

    class Kernel(DelegateKernel):
        fresh_outputs = True

        def init(self, subgraph, partition) -> None:  # noqa: ANN001
            pass

        def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
            returned.append(inputs[0] + inputs[0])
            return [returned[-1]]

    class Fresh(Delegate):
        name = "fresh"
        CAPABILITIES = Capabilities(ops=(OpCapability(op="ADD"),), model_types=ALL_YES)

        def create_kernel(self) -> DelegateKernel:
            return Kernel()

    interp, found = _run(Fresh())
    assert interp._executor.buffers[1] is returned[-1]
    np.testing.assert_array_equal(found, _expected())


def test_state_stays_writable_for_a_delegate() -> None:
    """Variable tensors (LSTM state) are the interpreter's buffers, updated in place by the
    kernel that owns them: a delegate gets them writable."""
    b = ModelBuilder()
    x = b.add_input("x", (4,))
    s = b.add_tensor("s", (4,), is_variable=True)
    y = b.add_tensor("y", (4,))
    b.add_operator("ADD", [x, s], [y])
    b.add_output(y)
    flags: list[bool] = []

    def record(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        flags.extend(a.flags.writeable for a in inputs)
        return [inputs[0] + inputs[1]]

    interp = offload.Interpreter(
        model_content=b.build(), experimental_delegates=[_delegate(record)]
    )
    interp.allocate_tensors()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        interp.invoke()
    assert flags == [False, True]

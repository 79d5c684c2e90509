"""OpKernel.run around a kernel's _run: each output held to its tensor's type and to the shape
the interpreter holds, and every failure named once with the node and its inputs."""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np
import pytest

import offload
from offload.errors import OpExecutionError, TensorShapeError
from offload.model.builder import ModelBuilder
from offload.ops import OpKernel
from offload.ops._registry import _KERNELS
from offload.ops.add import Add

NODE = "ADD v1 (node 0)"


def _add_model(shape: tuple[int, ...] = (2, 3)) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", shape)
    y = b.add_tensor("y", shape)
    b.add_operator("ADD", [x, x], [y])
    b.add_output(y)
    return b.build()


def _kernel(cls: type[OpKernel]) -> OpKernel:
    model = offload.load_model(model_content=_add_model())
    return cls(model.main.nodes[0], model.main)


def _returning(value: Any) -> type[OpKernel]:
    class Returns(OpKernel):
        op = "ADD"

        def _run(self, a: np.ndarray, b: np.ndarray) -> Any:
            return value(a) if callable(value) else value

    return Returns


X = np.ones((2, 3), np.float32)


def test_an_output_of_the_tensors_type_and_shape_is_returned_as_it_is():
    """What _run returns, when it fits, is what run returns: no copy."""
    out = np.empty((2, 3), np.float32)
    kernel = _kernel(_returning(out))
    kernel.expect_outputs([(2, 3)])
    assert kernel.run(X, X) is out


def test_an_output_of_another_type_names_the_node_the_tensor_and_both_types():
    """float64 for a float32 tensor: OpExecutionError, expected and found, whatever the shapes."""
    kernel = _kernel(_returning(lambda a: a.astype(np.float64)))
    with pytest.raises(OpExecutionError) as info:
        kernel.run(X, X)
    message = str(info.value)
    assert message.startswith(f"{NODE} failed: output 0 (tensor 1, 'y'): expected float32")
    assert "found float64[2, 3] (inputs: float32[2, 3], float32[2, 3])" in message


def test_the_shape_is_held_once_the_caller_says_what_it_holds():
    """Only the caller knows an output's shape at the current input shapes (after a resize);
    until it says, the shape is free, after it an array of another shape is an error."""
    kernel = _kernel(_returning(lambda a: a.reshape(6)))
    assert kernel.run(X, X).shape == (6,)
    kernel.expect_outputs([(2, 3)])
    with pytest.raises(OpExecutionError, match=r"expected float32\[2, 3\], found float32\[6\]"):
        kernel.run(X, X)
    kernel.expect_outputs([None])  # a shape only the run settles
    assert kernel.run(X, X).shape == (6,)


@pytest.mark.parametrize(
    ("value", "found"),
    [
        (None, "expected 1 output array(s), found NoneType"),
        ([], "expected 1 outputs, found 0"),
        ([X, X], "expected 1 outputs, found 2"),
        ([[1.0]], "output 0 (tensor 1, 'y'): expected a numpy array, found list"),
    ],
)
def test_a_result_that_is_not_one_array_per_output_is_an_error(value: Any, found: str):
    """The number and kind of outputs are checked too."""
    with pytest.raises(OpExecutionError, match=re.escape(f"{NODE} failed: {found}")):
        _kernel(_returning(value)).run(X, X)


def test_a_numpy_scalar_is_the_0d_array_it_stands_for():
    """numpy gives reductions to one value as scalars: run hands on a 0-d array."""
    model = offload.load_model(model_content=_add_model(()))
    kernel = _returning(np.float32(2.0))(model.main.nodes[0], model.main)
    kernel.expect_outputs([()])
    got = kernel.run(np.float32(1.0), np.float32(1.0))
    assert type(got) is np.ndarray and got.shape == () and got == 2.0


def test_a_failure_in_run_names_the_node_once_with_its_inputs_and_keeps_the_cause():
    """Any exception from _run becomes OpExecutionError: op, version, node, the exception and
    the input arrays, the original as its cause."""

    class Fails(OpKernel):
        op = "ADD"

        def _run(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
            raise ZeroDivisionError("division by 0")

    with pytest.raises(OpExecutionError) as info:
        _kernel(Fails).run(X, None)
    assert str(info.value) == (
        f"{NODE} failed: ZeroDivisionError: division by 0 (inputs: float32[2, 3], None)"
    )
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_an_offload_error_from_run_passes_through_as_it_is():
    """A kernel that raises a typed error has named the node already: not wrapped again."""

    class Refuses(OpKernel):
        op = "ADD"

        def _run(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
            raise TensorShapeError(f"{self.node.describe()}: expected equal shapes")

    with pytest.raises(TensorShapeError, match=f"^{re.escape(NODE)}: expected equal shapes$"):
        _kernel(Refuses).run(X, X)


def test_a_failure_in_setup_names_the_node_and_its_inputs():
    """setup fails as run does: OpExecutionError naming the node, once."""

    class Broken(OpKernel):
        op = "ADD"

        def setup(self) -> None:
            raise KeyError("fused_activation_function")

    with pytest.raises(OpExecutionError) as info:
        _kernel(Broken)
    assert str(info.value) == (
        f"{NODE} could not be set up: KeyError: 'fused_activation_function' "
        "(inputs: float32[2, 3], float32[2, 3])"
    )


def test_the_interpreter_holds_kernel_outputs_to_its_shapes(monkeypatch: pytest.MonkeyPatch):
    """Through invoke, after resize_tensor_input: the shapes held are the resized ones, and an
    error names the node once."""

    class Stale(Add):  # ADD's shape rule: the interpreter knows the output's shape
        def _run(self, a: np.ndarray, b: np.ndarray, out: Any = None) -> np.ndarray:
            return np.zeros((2, 3), np.float32)  # the model's shape, whatever the input's

    monkeypatch.setitem(_KERNELS, "ADD", Stale)
    interp = offload.Interpreter(model_content=_add_model(), delegates=[])
    interp.allocate_tensors()
    index = interp.get_input_details()[0]["index"]
    interp.set_tensor(index, X)
    interp.invoke()
    interp.resize_tensor_input(index, [4, 3])
    interp.allocate_tensors()
    interp.set_tensor(index, np.ones((4, 3), np.float32))
    with pytest.raises(OpExecutionError) as info:
        interp.invoke()
    message = str(info.value)
    assert "expected float32[4, 3], found float32[2, 3]" in message
    assert message.count(NODE) == 1


def test_a_kernel_that_overrides_run_still_runs_checked_with_a_warning():
    """A kernel written for 0.1 overrides run(): warned once at its class; its run is taken
    as _run, so its outputs are checked and its failures named like every other kernel's."""
    with pytest.warns(DeprecationWarning, match=r"overriding run\(\).*_run\(\)") as caught:

        class Old(OpKernel):
            op = "ADD"

            def run(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:  # type: ignore[override]
                return (a + b).astype(np.float64)

    assert caught[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernel = _kernel(Old)
        with pytest.raises(OpExecutionError, match="expected float32.*found float64"):
            kernel.run(X, X)


def test_an_array_held_for_a_kernel_that_writes_into_one_is_filled_and_returned():
    """The interpreter's arena slot, held once with expect_outputs, is what _run writes and
    run returns; an array of another shape or type is refused when it is held."""
    model = offload.load_model(model_content=_add_model())
    kernel = Add(model.main.nodes[0], model.main)
    assert kernel.writes_into
    slot = np.empty((2, 3), np.float32)
    kernel.expect_outputs([(2, 3)], out=slot)
    assert kernel.run(X, X) is slot
    np.testing.assert_array_equal(slot, X + X)
    with pytest.raises(ValueError, match=r"expected an out array.*found float32\[3, 2\]"):
        kernel.expect_outputs([(2, 3)], out=np.empty((3, 2), np.float32))

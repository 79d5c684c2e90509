"""API misuse raises a typed error of the built-in family LiteRT raises (issue 25, class 6), and
a signature that lies about its subgraph or tensors is refused, never run or indexed blindly.

The families were read from ai-edge-litert 2.x: its Interpreter raises ValueError for a bad
tensor or subgraph index, for a tensor with no data, and for a signature index out of range;
its CompiledModel refuses a model whose signature is out of range with RuntimeError. The fuzz
target ``api`` (tests/_fuzz_targets.py) compares the two on random misuse.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import offload
from offload.errors import (
    InterpreterStateError,
    InvalidSignatureError,
    ModelLoadError,
    NoTensorValueError,
    SignatureError,
    SubgraphIndexError,
    TensorIndexError,
)

from ._fuzz_targets import _two_subgraphs, _with_signature

# _two_subgraphs: main x(0) -> ADD -> y(1) -> RELU -> z(2); subgraph 1: u(0) -> RELU -> v(1).
X, Y, Z = 0, 1, 2


def _interpreter(content: bytes | None = None, **kwargs: Any) -> offload.Interpreter:
    interp = offload.Interpreter(
        model_content=content if content is not None else _two_subgraphs(),
        delegates=[],
        **kwargs,
    )
    interp.allocate_tensors()
    return interp


def _lying(subgraph: int = 0, x: int = X, z: int = Z) -> bytes:
    """The two-subgraph model with a serving_default signature x -> z written as given."""
    return _with_signature(_two_subgraphs, subgraph, x, z)


# -- signatures that lie ---------------------------------------------------------------------


@pytest.mark.parametrize("subgraph", [2, 2**31 - 1, 2**32 - 1])
def test_signature_subgraph_out_of_range_is_refused(subgraph: int) -> None:
    """A signature naming a subgraph the model lacks is an InvalidSignatureError (a ValueError)
    naming the signature, the subgraph found and the range."""
    interp = _interpreter(_lying(subgraph=subgraph))
    with pytest.raises(InvalidSignatureError, match=rf"'serving_default'.*{subgraph}.*0\.\.1"):
        interp.get_signature_runner("serving_default")


@pytest.mark.parametrize(
    ("where", "indices"),
    [("input 'x'", {"x": 3}), ("input 'x'", {"x": 2**32 - 1}), ("output 'z'", {"z": 100})],
)
def test_signature_tensor_out_of_range_is_refused(where: str, indices: dict[str, int]) -> None:
    """A signature input or output index outside its subgraph's tensors is refused when the
    runner is made, naming the signature, the name, the index and the range."""
    interp = _interpreter(_lying(**indices))
    index = next(iter(indices.values()))
    with pytest.raises(InvalidSignatureError, match=rf"{where} is tensor {index},.*0\.\.2"):
        offload.interpreter.SignatureRunner(interp, "serving_default")


@pytest.mark.parametrize(("tensor", "op"), [(Y, r"ADD v1 \(node 0\)"), (Z, r"RELU v1 \(node 1\)")])
def test_signature_input_written_by_an_op_is_refused(tensor: int, op: str) -> None:
    """A signature input that an op writes (LiteRT: ValueError) is refused, naming the
    signature and the op, instead of running with the value overwritten (zeros)."""
    interp = _interpreter(_lying(x=tensor))
    with pytest.raises(InvalidSignatureError, match=rf"'serving_default' input 'x'.*{op} writes"):
        interp.get_signature_runner("serving_default")


def test_invalid_signature_error_is_caught_as_litert_users_catch_it() -> None:
    """InvalidSignatureError is a ValueError and a ModelLoadError (the Interpreter's family) and
    a SignatureError, so a RuntimeError (the CompiledModel's)."""
    for cls in (ValueError, ModelLoadError, SignatureError, RuntimeError):
        assert issubclass(InvalidSignatureError, cls), cls


@pytest.mark.parametrize("lie", [{"subgraph": 5}, {"x": 3}, {"z": 3}, {"x": Y}])
def test_compiled_model_refuses_a_lying_signature_at_load(lie: dict[str, int]) -> None:
    """CompiledModel checks every signature at load, as LiteRT's refuses such a model there,
    instead of indexing a tensor table with it later."""
    with pytest.raises(InvalidSignatureError, match="signature 'serving_default'"):
        offload.CompiledModel.from_buffer(_lying(**lie))


def test_honest_signatures_still_run() -> None:
    """The check passes a signature on another subgraph, whose output is that subgraph's."""
    runner = _interpreter(_lying(subgraph=1, x=0, z=1)).get_signature_runner("serving_default")
    np.testing.assert_array_equal(runner(x=np.array([-1, 2, 3], np.float32))["z"], [0, 2, 3])


def test_signature_output_freed_is_a_value_error() -> None:
    """A signature output that is a freed intermediate is a NoTensorValueError saying how to
    keep it (LiteRT: ValueError), not an object array; preserved, it is returned."""
    content = _lying(z=Y)
    with pytest.raises(NoTensorValueError, match="output 'z' is tensor 1.*preserve_all_tensors"):
        _interpreter(content).get_signature_runner()(x=np.ones(2, np.float32))
    kept = _interpreter(content, experimental_preserve_all_tensors=True)
    out = kept.get_signature_runner()(x=np.ones(2, np.float32))
    np.testing.assert_array_equal(out["z"], [2, 2])


# -- tensor and subgraph indices -------------------------------------------------------------

_BAD_INDEX_CALLS: dict[str, Callable[[offload.Interpreter, Any], Any]] = {
    "get_tensor": lambda it, i: it.get_tensor(i),
    "get_tensor of subgraph 1": lambda it, i: it.get_tensor(i, 1),
    "set_tensor": lambda it, i: it.set_tensor(i, np.zeros(2, np.float32)),
    "tensor": lambda it, i: it.tensor(i),
}


@pytest.mark.parametrize("call", sorted(_BAD_INDEX_CALLS))
@pytest.mark.parametrize("index", [-1, 3, 2**31])
def test_bad_tensor_index_is_a_value_error(call: str, index: int) -> None:
    """A tensor index out of range is a TensorIndexError that is a ValueError (as LiteRT's
    "Invalid tensor index") and still an IndexError."""
    with pytest.raises(TensorIndexError) as caught:
        _BAD_INDEX_CALLS[call](_interpreter(), index)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, IndexError)


def test_set_tensor_on_a_non_input_is_a_value_error() -> None:
    """set_tensor on a tensor that is no input is refused with a ValueError, LiteRT's family."""
    with pytest.raises(ValueError, match="not an input"):
        _interpreter().set_tensor(Z, np.zeros((1, 2), np.float32))


@pytest.mark.parametrize("subgraph_index", [2, -1, 2**31, 1.0, 0.0, "0", None])
def test_get_tensor_subgraph_index_out_of_range(subgraph_index: Any) -> None:
    """get_tensor(i, subgraph_index=k) with k no subgraph index is a SubgraphIndexError (a
    ValueError, as LiteRT's), never subgraph 0's tensor."""
    with pytest.raises(SubgraphIndexError, match=r"0\.\.1"):
        _interpreter().get_tensor(X, subgraph_index=subgraph_index)


# -- tensors with no value -------------------------------------------------------------------

_NO_VALUE: dict[str, tuple[bool, Callable[[offload.Interpreter], Any], str]] = {
    # name: (allocate first, call, what the message says to do)
    "before allocate_tensors": (False, lambda it: it.get_tensor(Y), "allocate_tensors"),
    "a freed intermediate": (True, lambda it: it.get_tensor(Y), "preserve_all_tensors"),
    "the view of a freed intermediate": (True, lambda it: it.tensor(Y)(), "preserve_all"),
    "subgraph 1 before its runner": (True, lambda it: it.get_tensor(0, 1), "signature runner"),
}


@pytest.mark.parametrize("case", sorted(_NO_VALUE))
def test_tensor_without_value_is_a_value_error(case: str) -> None:
    """Reading a tensor with no value is a NoTensorValueError: a ValueError, as LiteRT's
    "Tensor data is null", and still the InterpreterStateError it was."""
    allocate, call, hint = _NO_VALUE[case]
    interp = offload.Interpreter(model_content=_two_subgraphs(), delegates=[])
    if allocate:
        interp.allocate_tensors()
        interp.set_tensor(X, np.ones(2, np.float32))
        interp.invoke()
    with pytest.raises(NoTensorValueError, match=hint) as caught:
        call(interp)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, InterpreterStateError)

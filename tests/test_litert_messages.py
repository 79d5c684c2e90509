"""Each misuse in offload's table of LiteRT messages, provoked in the installed LiteRT and in
offload: LiteRT still says the table's text, and offload raises the same class (or a subclass)
with that text first. A LiteRT upgrade that rewords a message fails here, not in users' code."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from offload import interpreter as ours
from offload._litert_compat import LITERT_MESSAGES
from offload.model.builder import ModelBuilder

litert = pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed")


def _model(signature: str | None = None) -> bytes:
    b = ModelBuilder(signature_key=signature)
    x = b.add_input("x", (1, 4))
    y = b.add_tensor("y", (1, 4))
    b.add_operator("RELU", inputs=[x], outputs=[y])
    b.add_output(y)
    return b.build()


MODEL = _model()
SIGNED = _model("serving")


def _ready(m: Any) -> Any:
    interp = m.Interpreter(model_content=MODEL)
    interp.allocate_tensors()
    return interp


def _view_held(m: Any) -> None:
    interp = _ready(m)
    view = interp.tensor(0)()
    try:
        interp.invoke()
    finally:
        del view


# case -> (the misuse, given LiteRT's module or offload's; the fields of the table's text)
CASES: dict[str, tuple[Callable[[Any], Any], dict[str, Any]]] = {
    "no_model": (lambda m: m.Interpreter(), {}),
    "both_models": (lambda m: m.Interpreter(model_path="x.tflite", model_content=MODEL), {}),
    "open_failed": (
        lambda m: m.Interpreter(model_path="no_such.tflite"),
        {"path": "no_such.tflite"},
    ),
    "not_flatbuffer": (lambda m: m.Interpreter(model_content=b"not a model at all"), {}),
    "threads_type": (lambda m: m.Interpreter(model_content=MODEL, num_threads=1.5), {}),
    "threads_value": (lambda m: m.Interpreter(model_content=MODEL, num_threads=0), {}),
    "resolver": (
        lambda m: m.Interpreter(model_content=MODEL, experimental_op_resolver_type="x"),
        {"value": "x"},
    ),
    "not_ready": (lambda m: m.Interpreter(model_content=MODEL).invoke(), {}),
    "view_held": (_view_held, {}),
    "tensor_index": (lambda m: _ready(m).get_tensor(7), {"index": 7, "count": 2}),
    "node_index": (lambda m: _ready(m)._get_op_details(5), {}),
    "subgraph_index": (lambda m: _ready(m).get_tensor_details(3), {"index": 3, "count": 1}),
    "no_tensor_data": (lambda m: m.Interpreter(model_content=MODEL).get_tensor(0), {}),
    "set_unallocated": (
        lambda m: m.Interpreter(model_content=MODEL).set_tensor(0, np.zeros((1, 4), np.float32)),
        {},
    ),
    "set_dtype": (
        lambda m: _ready(m).set_tensor(0, np.zeros((1, 4))),
        {"found": "FLOAT64", "expected": "FLOAT32", "index": 0, "name": "x"},
    ),
    "set_rank": (
        lambda m: _ready(m).set_tensor(0, np.zeros(4, np.float32)),
        {"found": 1, "expected": 2, "index": 0},
    ),
    "set_dim": (
        lambda m: _ready(m).set_tensor(0, np.zeros((1, 3), np.float32)),
        {"found": 3, "expected": 4, "dim": 1, "index": 0},
    ),
    "signature_key": (lambda m: _ready(m).get_signature_runner("nope"), {"key": "nope"}),
    "signature_key_none": (lambda m: _ready(m).get_signature_runner(), {"count": 0}),
    "signature_inputs": (
        lambda m: m.Interpreter(model_content=SIGNED).get_signature_runner("serving")(),
        {"expected": 1, "found": 0},
    ),
    "runner_interpreter": (lambda m: m.SignatureRunner(None, "serving"), {}),
    "runner_key": (lambda m: m.SignatureRunner(_ready(m), None), {}),
    "registerer_symbol": (
        lambda m: m.InterpreterWithCustomOps(
            model_content=MODEL, custom_op_registerers=["NoSuchRegisterer"]
        ),
        {"name": "NoSuchRegisterer"},
    ),
}
# Cases provoked elsewhere, with what they need.
ELSEWHERE = {
    "delegate_load": "raised by the litert plugin; tests/litert/test_c_delegate.py",
    "registerer_library": "the error text is the platform's dlopen message: test_litert_parity",
    "not_array": "needs a string tensor: test_litert_drop_in",
}


def _words(text: str) -> str:
    return " ".join(text.split())


def test_every_case_is_checked():
    """Each entry of the table is provoked here or named with where it is."""
    assert set(CASES) | set(ELSEWHERE) == set(LITERT_MESSAGES)
    assert not set(CASES) & set(ELSEWHERE)


@pytest.mark.parametrize("case", sorted(CASES))
def test_litert_and_offload_say_the_same(case: str):
    """LiteRT raises the table's text; offload the same class with that text first."""
    provoke, fields = CASES[case]
    text = LITERT_MESSAGES[case].format(**fields)
    with pytest.raises(Exception) as theirs:
        provoke(litert)
    with pytest.raises(Exception) as mine:
        provoke(ours)
    gc.collect()
    # LiteRT wraps one of its messages across lines; words are compared, not whitespace.
    assert _words(text) in _words(str(theirs.value)), f"LiteRT now says: {theirs.value}"
    assert isinstance(mine.value, type(theirs.value)), (type(mine.value), type(theirs.value))
    assert str(mine.value).startswith(text.rstrip()), str(mine.value)

"""offload's LiteRT API against the installed LiteRT, read by introspection: every public
member of ``ai_edge_litert.interpreter`` (module names, Interpreter, SignatureRunner,
load_delegate) exists in ``offload.interpreter`` with LiteRT's parameter names, defaults and
keyword-ness, and returns data of LiteRT's shape. Differences are allowed only where
``offload.interpreter.DIFFERENCES`` documents them."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import offload
from offload import interpreter as ours
from offload._litert_compat import LITERT_OPTIONS
from offload.model.builder import ModelBuilder
from tests._parity import Parity, public_members

litert = pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed")

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CLASSES = ("Interpreter", "SignatureRunner", "InterpreterWithCustomOps")
# LiteRT keywords offload's constructor takes through **kwargs, with LiteRT's defaults.
ABSORBED = {"Interpreter.__init__": LITERT_OPTIONS}
# Leading positional parameters that must stay where LiteRT has them, whatever is documented.
POSITIONAL_PREFIX = {"Interpreter.__init__": 4}


_PARITY = Parity(ours.DIFFERENCES, "offload.interpreter", ABSORBED, POSITIONAL_PREFIX)
signature_problems = _PARITY.signature_problems
class_problems = _PARITY.class_problems
module_problems = _PARITY.module_problems


# -- the introspection checks -----------------------------------------------------------------


def test_module_names_match_litert():
    """offload.interpreter has every public name of LiteRT's module, each taken as LiteRT's."""
    assert module_problems(litert, ours) == []


@pytest.mark.parametrize("name", CLASSES)
def test_class_members_match_litert(name: str):
    """Each public member of LiteRT's class exists in offload's with a compatible signature."""
    assert class_problems(name, getattr(litert, name), getattr(ours, name)) == []


def test_top_level_names_are_the_module_s():
    """offload.Interpreter, offload.load_delegate... are the objects offload.interpreter has."""
    for name in ("Interpreter", "SignatureRunner", "load_delegate"):
        assert getattr(offload, name) is getattr(ours, name)


def test_documented_differences_name_real_members():
    """Every DIFFERENCES entry names a member LiteRT has, so none outlives what it excuses."""
    for key in ours.DIFFERENCES:
        head = key.split("(")[0]
        obj: Any = litert
        for part in head.split("."):
            assert hasattr(obj, part), f"DIFFERENCES entry {key!r}: LiteRT has no {head}"
            obj = getattr(obj, part)
        if "(" in key and not key.endswith("(positional arguments)"):
            param = key.split("(")[1].rstrip(")")
            assert param in inspect.signature(obj).parameters, key


# -- the checks catch what they are for ---------------------------------------------------------


def test_a_renamed_method_is_reported():
    """A method renamed in offload (the gettensor_details slip) fails the check, by name."""

    class Renamed(ours.Interpreter):
        get_tensor_details = None  # type: ignore[assignment]  # hide the real one

        def gettensor_details(self, subgraph_index: int = 0) -> list:
            return []

    members = public_members(Renamed)
    del members["get_tensor_details"]
    problems = [
        p
        for p in class_problems("Interpreter", litert.Interpreter, type("R", (), members))
        if "get_tensor_details" in p
    ]
    assert problems == [
        "Interpreter.get_tensor_details is missing (LiteRT has get_tensor_details"
        "(self, subgraph_index=0))"
    ]


def test_changed_defaults_and_keywords_are_reported():
    """A different default, a parameter made keyword-only, an extra required one: each named."""

    def theirs(self, tensor_index, subgraph_index=0):  # noqa: ANN001, ANN202
        pass

    def mine(self, tensor_index, *, subgraph_index=1, extra):  # noqa: ANN001, ANN202
        pass

    problems = signature_problems("X.get_tensor", theirs, mine)
    assert any("subgraph_index defaults to 1" in p for p in problems)
    assert any("subgraph_index is keyword-only" in p for p in problems)
    assert any("requires 'extra'" in p for p in problems)


def test_a_missing_module_name_is_reported():
    """A name LiteRT's module has and offload's lacks fails the check."""
    fake = type("M", (), {n: getattr(ours, n) for n in ours.__all__ if n != "OpResolverType"})
    assert "offload.interpreter.OpResolverType is missing" in module_problems(litert, fake)


# -- return shapes ------------------------------------------------------------------------------


def structure(value: Any) -> Any:
    """The shape of a result: types, keys, array dtypes and ranks, not the numbers."""
    if isinstance(value, Mapping):
        return {k: structure(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [structure(v) for v in value])
    if isinstance(value, np.ndarray):
        return ("ndarray", str(value.dtype), value.ndim)
    if isinstance(value, type):
        return ("type", value.__name__)
    if callable(value):
        return "callable"
    if isinstance(value, np.generic):
        return ("numpy", type(value).__name__)
    return type(value).__name__


def _inputs(details: list[dict]) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(d["shape"]).astype(d["dtype"]) for d in details]


# How to call each public member of LiteRT's Interpreter: a new LiteRT method without a recipe
# here fails test_every_member_has_a_recipe, so the return-shape check cannot fall behind.
RECIPES: dict[str, Callable[[Any], Any]] = {
    "allocate_tensors": lambda it: it.allocate_tensors(),
    "experimental_compress_quantization_zero_points": (
        lambda it: it.experimental_compress_quantization_zero_points
    ),
    "get_input_details": lambda it: it.get_input_details(),
    "get_output_details": lambda it: it.get_output_details(),
    "get_signature_list": lambda it: it.get_signature_list(),
    "get_signature_runner": lambda it: (
        it.get_signature_runner().get_input_details(),
        it.get_signature_runner().get_output_details(),
        it.get_signature_runner()(image=_inputs(it.get_input_details())[0]),
    ),
    "get_tensor": lambda it: it.get_tensor(it.get_output_details()[0]["index"]),
    "get_tensor_details": lambda it: (it.get_tensor_details(), it.get_tensor_details(0)),
    "invoke": lambda it: it.invoke(),
    "num_subgraphs": lambda it: it.num_subgraphs(),
    "reset_all_variables": lambda it: it.reset_all_variables(),
    "resize_tensor_input": lambda it: it.resize_tensor_input(0, [1, 64, 64, 3], strict=True),
    "set_tensor": lambda it: it.set_tensor(0, _inputs(it.get_input_details())[0]),
    "tensor": lambda it: it.tensor(it.get_output_details()[0]["index"])().shape,
}


def test_every_member_has_a_recipe():
    """The return-shape check covers every public member of LiteRT's Interpreter."""
    members = {m for m in public_members(litert.Interpreter) if not m.startswith("__")}
    assert members == set(RECIPES)


def _interpreter(module: Any, **kwargs: Any) -> Any:
    path = str(FIXTURES / "small_cnn_float32.tflite")
    it = module.Interpreter(model_path=path, **kwargs)
    it.allocate_tensors()
    it.set_tensor(0, _inputs(it.get_input_details())[0])
    it.invoke()
    return it


@pytest.mark.parametrize("member", sorted(RECIPES))
def test_return_shape_matches_litert(member: str):
    """Each member returns data of LiteRT's shape: same types, keys, dtypes, ranks."""
    theirs = RECIPES[member](_interpreter(litert))
    mine = RECIPES[member](_interpreter(ours, delegates=[]))
    assert structure(mine) == structure(theirs)


@pytest.mark.parametrize("model", ["small_cnn_int8", "mobilenet_v3_small_qat", "lstm_float32"])
@pytest.mark.parametrize("compress", [False, True])
def test_tensor_details_equal_litert(model: str, compress: bool):
    """get_tensor_details() has LiteRT's values too, per-channel and compressed zero points."""
    kwargs = {"experimental_compress_quantization_zero_points": compress}
    path = str(FIXTURES / f"{model}.tflite")
    theirs = litert.Interpreter(model_path=path, **kwargs).get_tensor_details()
    mine = ours.Interpreter(model_path=path, delegates=[], **kwargs).get_tensor_details()
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs):
        np.testing.assert_equal(a, b, err_msg=f"tensor {b['index']} ({b['name']})")


def test_subgraphs_as_litert():
    """num_subgraphs and get_tensor_details(subgraph_index) read every subgraph as LiteRT."""
    b = ModelBuilder()
    extra = b.add_subgraph("extra")
    u, v = extra.add_input("u", (3,)), extra.add_tensor("v", (3,))
    extra.add_operator("RELU", [u], [v])
    extra.add_output(v)
    x, y = b.add_input("x", (2,)), b.add_tensor("y", (2,))
    b.add_operator("ADD", [x, x], [y])
    b.add_output(y)
    content = b.build()
    theirs = litert.Interpreter(model_content=content)
    mine = ours.Interpreter(model_content=content, delegates=[])
    assert mine.num_subgraphs() == theirs.num_subgraphs() == 2
    for index in (0, 1):
        np.testing.assert_equal(mine.get_tensor_details(index), theirs.get_tensor_details(index))
    with pytest.raises(ValueError, match="subgraph_index is out of range"):
        mine.get_tensor_details(2)
    with pytest.raises(offload.errors.InterpreterStateError, match="of subgraph 1 has no value"):
        mine.get_tensor(0, subgraph_index=1)  # no signature runner has run subgraph 1
    with pytest.raises(ValueError):
        theirs.get_tensor_details(2)


def test_signature_runner_made_as_in_litert():
    """SignatureRunner(interpreter, key) works as LiteRT's and shares the interpreter's state."""
    it = ours.Interpreter(model_path=str(FIXTURES / "small_cnn_float32.tflite"), delegates=[])
    runner = ours.SignatureRunner(it, "serving_default")
    x = _inputs(it.get_input_details())[0]
    np.testing.assert_array_equal(
        runner(image=x)["mask"], it.get_signature_runner()(image=x)["mask"]
    )
    with pytest.raises(ValueError, match="expects an Interpreter"):
        ours.SignatureRunner()


def test_unknown_keyword_is_a_type_error():
    """A keyword LiteRT does not take is a TypeError naming it, not silently dropped."""
    with pytest.raises(TypeError, match="unexpected keyword argument 'experimental_nope'"):
        ours.Interpreter(model_path=str(FIXTURES / "small_cnn_float32.tflite"), experimental_nope=1)


def test_litert_op_resolver_type_is_accepted():
    """LiteRT's own OpResolverType members are taken, matched by name."""
    it = ours.Interpreter(
        model_path=str(FIXTURES / "small_cnn_float32.tflite"),
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    assert it.num_subgraphs() == 1


def test_custom_op_registerers_are_refused_clearly():
    """InterpreterWithCustomOps without registerers is an Interpreter; with them, a typed error."""
    path = str(FIXTURES / "small_cnn_float32.tflite")
    assert ours.InterpreterWithCustomOps(model_path=path, delegates=[]).num_subgraphs() == 1
    with pytest.raises(offload.errors.IncompatibleOptionError, match="custom_op_registerers"):
        ours.InterpreterWithCustomOps(custom_op_registerers=["Register"], model_path=path)
    # A name LiteRT could not look up gets LiteRT's error; one it could ("malloc" is in every
    # process) still cannot be called by offload.
    with pytest.raises(ValueError, match="Looking up symbol 'NoSuchRegisterer' failed"):
        ours.InterpreterWithCustomOps(custom_op_registerers=["NoSuchRegisterer"], model_path=path)
    with pytest.raises(ValueError, match=r"Loading library 'no_such_module\.so' failed"):
        ours.InterpreterWithCustomOps(custom_op_registerers=["no_such_module.R"], model_path=path)
    with pytest.raises(offload.errors.IncompatibleOptionError, match=r"C\+\+ kernels"):
        ours.InterpreterWithCustomOps(custom_op_registerers=["malloc"], model_path=path)


def test_load_delegate_old_keyword_warns():
    """load_delegate(name=...) still works, with a DeprecationWarning naming library= and 0.3.0."""
    with pytest.warns(
        DeprecationWarning, match=r"removed in offload 0\.3\.0; use load_delegate\(library="
    ):
        delegate = offload.load_delegate(name="dummy")
    assert delegate.name == "dummy"

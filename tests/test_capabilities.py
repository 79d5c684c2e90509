"""Capability declarations: checked where they are written, matched as documented."""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import offload
from offload import Capabilities, ModelTypeSupport, OpCapability
from offload._capabilities import check_node
from offload.errors import CapabilityDeclarationError
from offload.model import ModelBuilder


def _add(act: str = "NONE", out_dtype: type = np.float32) -> offload.Model:
    """x + y, both runtime float32 inputs, with a fused activation and an output dtype."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 4))
    y = b.add_input("y", shape=(1, 4))
    z = b.add_tensor("z", shape=(1, 4), dtype=out_dtype)
    b.add_operator("ADD", [x, y], [z], options={"fused_activation_function": act})
    b.add_output(z)
    return offload.load_model(model_content=b.build())


def _reason(cap: OpCapability, model: offload.Model) -> str | None:
    return check_node(cap, model.main.nodes[0], model.main)


def test_bad_dtype_names_the_op_and_the_field() -> None:
    """A dtype that does not exist is a typed error naming the op, the field and the value."""
    with pytest.raises(CapabilityDeclarationError, match=r"'ADD': dtypes.0: .*found 'float33'"):
        OpCapability(op="ADD", dtypes=("float33",))


def test_option_takes_a_set_of_allowed_values() -> None:
    """A tuple, list or set in options lists the allowed values; a scalar is the only one."""
    cap = OpCapability(op="ADD", options={"fused_activation_function": {"NONE", "RELU"}})
    assert cap.options == {"fused_activation_function": ("NONE", "RELU")}
    assert _reason(cap, _add("RELU")) is None
    assert _reason(cap, _add("RELU6")) == (
        "options: fused_activation_function must be one of ['NONE', 'RELU'], found 'RELU6'"
    )
    single = OpCapability(op="ADD", options={"fused_activation_function": "NONE"})
    assert "must be 'NONE', found 'RELU'" in str(_reason(single, _add("RELU")))


def test_option_key_the_op_lacks_is_rejected() -> None:
    """An option the op's options table does not have is rejected, listing the ones it has."""
    with pytest.raises(CapabilityDeclarationError, match=r"CONV_2D has no option 'pad'.*padding"):
        OpCapability(op="CONV_2D", options={"pad": "SAME"})
    with pytest.raises(CapabilityDeclarationError, match="LOGISTIC has no option 'beta'"):
        OpCapability(op="LOGISTIC", options={"beta": 1.0})


def test_enum_option_values_are_checked() -> None:
    """An enum option must name values of TFLite's enum."""
    with pytest.raises(CapabilityDeclarationError, match=r"padding takes \['SAME', 'VALID'\]"):
        OpCapability(op="CONV_2D", options={"padding": ("SAME", "VALLID")})


def test_vector_option_wants_a_list_of_tuples() -> None:
    """A vector option's allowed values are tuples; a bare tuple of numbers is ambiguous."""
    with pytest.raises(CapabilityDeclarationError, match="squeeze_dims is a vector field"):
        OpCapability(op="SQUEEZE", options={"squeeze_dims": (1, 2)})
    assert OpCapability(op="SQUEEZE", options={"squeeze_dims": [(1, 2)]}).options == {
        "squeeze_dims": ((1, 2),)
    }


def test_float_options_match_at_float32_precision() -> None:
    """A declared 0.1 matches the float32 0.1 the schema stores."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 4))
    y = b.add_tensor("y", shape=(1, 4))
    b.add_operator("SOFTMAX", [x], [y], options={"beta": 0.1})
    b.add_output(y)
    model = offload.load_model(model_content=b.build())
    assert _reason(OpCapability(op="SOFTMAX", options={"beta": 0.1}), model) is None


def test_fused_activations_are_tflite_names_on_ops_that_have_one() -> None:
    """fused_activations names come from ActivationFunctionType, on ops that fuse one."""
    with pytest.raises(CapabilityDeclarationError, match=r"found \['RELU_6'\]"):
        OpCapability(op="ADD", fused_activations=("RELU_6",))
    with pytest.raises(CapabilityDeclarationError, match="LOGISTIC has no fused activation"):
        OpCapability(op="LOGISTIC", fused_activations=("NONE",))


def test_input_positions_are_consistent() -> None:
    """constant_inputs are distinct, non-negative and below max_inputs."""
    with pytest.raises(CapabilityDeclarationError, match=r"positions \[2\] are beyond max_in"):
        OpCapability(op="ADD", constant_inputs=(2,), max_inputs=2)
    with pytest.raises(CapabilityDeclarationError, match="distinct"):
        OpCapability(op="PAD", constant_inputs=(1, 1))
    with pytest.raises(CapabilityDeclarationError, match="constant_inputs.0"):
        OpCapability(op="PAD", constant_inputs=(-1,))


def test_dtypes_cover_outputs_unless_output_dtypes_is_given() -> None:
    """dtypes is checked on runtime inputs and outputs; output_dtypes overrides it for outputs."""
    model = _add(out_dtype=np.int32)
    assert _reason(OpCapability(op="ADD"), model) == (
        "dtypes: output 0 is int32, supported ['float32']"
    )
    assert _reason(OpCapability(op="ADD", output_dtypes=("int32",)), model) is None


def test_capabilities_from_a_mapping_name_the_op() -> None:
    """Capabilities built from nested data name the op whose field is wrong."""
    data = {"ops": [{"op": "MUL"}, {"op": "ADD", "max_rank": -1}], "model_types": {}}
    with pytest.raises(CapabilityDeclarationError, match="'ADD': max_rank"):
        Capabilities(**data)


@pytest.fixture
def plugin_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """An entry point 'declares' whose module is written by the test under tmp_path."""
    eps = [importlib.metadata.EntryPoint("declares", "fake_declares_plugin", "offload.delegates")]
    monkeypatch.setattr("offload._plugins._entry_points", lambda: eps)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fake_declares_plugin", raising=False)
    offload.reload_plugins()
    yield tmp_path
    offload.reload_plugins()


def test_invalid_declaration_at_import_makes_the_plugin_invalid(plugin_dir: Path) -> None:
    """A capability that cannot be valid, built at import, names the plugin, the op, the field."""
    (plugin_dir / "fake_declares_plugin.py").write_text(
        "from offload import OpCapability\nCAP = OpCapability(op='ADD', dtypes=('float33',))\n"
    )
    with pytest.warns(UserWarning, match=r'plugin "declares" is invalid: .*\'ADD\': dtypes'):
        (record,) = offload.list_plugins()
    assert record.status == "invalid"
    assert isinstance(record.exception, CapabilityDeclarationError)


def test_model_types_must_all_be_declared() -> None:
    """Every model type gets a yes/no/partial."""
    with pytest.raises(CapabilityDeclarationError, match="missing"):
        Capabilities(ops=(), model_types={"float32": ModelTypeSupport(support="yes")})


def _hybrid_fully_connected() -> offload.Model:
    """A dynamic-range FULLY_CONNECTED: float input, int8 constant weights."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 4))
    w = b.add_constant("w", np.ones((3, 4), np.int8), quantization=(0.5, 0))
    y = b.add_tensor("y", shape=(1, 3))
    b.add_operator("FULLY_CONNECTED", [x, w, -1], [y], version=12)
    b.add_output(y)
    return offload.load_model(model_content=b.build())


def test_constant_dtypes_limit_the_constant_inputs() -> None:
    """dtypes does not see constant weights; constant_dtypes refuses int8 weights by name."""
    model = _hybrid_fully_connected()
    loose = OpCapability(op="FULLY_CONNECTED", versions=(1, 12), constant_inputs=(1, 2))
    assert _reason(loose, model) is None
    strict = loose.model_copy(update={"constant_dtypes": ("float32",)})
    assert _reason(strict, model) == "constant_dtypes: input 1 is int8, supported ['float32']"


def test_constant_dtypes_need_constant_inputs() -> None:
    """constant_dtypes without constant_inputs limits nothing, so it is refused at load."""
    with pytest.raises(CapabilityDeclarationError, match="constant_dtypes: expected constant"):
        OpCapability(op="CONV_2D", constant_dtypes=("float32",))


def test_unsupported_ops_give_the_reason_an_undeclared_op_stays_on_the_cpu() -> None:
    """An op in unsupported_ops is refused with the delegate's reason, not the bare one; an op
    both declared and listed there is a declaration error naming it."""
    yes = {t: ModelTypeSupport(support="yes") for t in offload.ModelType.__args__}

    class Engine(offload.Delegate):
        name = "engine_without_add"
        CAPABILITIES = Capabilities(
            ops=(OpCapability(op="SUB"),), model_types=yes, unsupported_ops={"ADD": "no adder"}
        )

    model = _add()
    reason = Engine().is_node_supported(model.main.nodes[0], model.main)
    assert reason == "op ADD is not supported: no adder"
    with pytest.raises(CapabilityDeclarationError, match=r"unsupported_ops names declared ops"):
        Capabilities(ops=(OpCapability(op="ADD"),), model_types=yes, unsupported_ops={"ADD": "x"})

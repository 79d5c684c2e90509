"""The model builder writes .tflite bytes that offload reads back and LiteRT runs."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import tflite

import offload
from offload.errors import ModelBuildError
from offload.model import ModelBuilder, options_type_for

litert = pytest.importorskip("ai_edge_litert.interpreter")


def run_litert(content: bytes, *inputs: np.ndarray) -> list[np.ndarray]:
    interp = litert.Interpreter(
        model_content=content,
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    interp.allocate_tensors()
    for detail, value in zip(interp.get_input_details(), inputs):
        interp.set_tensor(detail["index"], value)
    interp.invoke()
    return [interp.get_tensor(d["index"]) for d in interp.get_output_details()]


def add_model(activation: str) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 4), dtype=np.float32)
    c = b.add_constant("c", np.array([[-2.0, -0.5, 0.5, 2.0]], np.float32))
    y = b.add_tensor("y", shape=(1, 4), dtype=np.float32)
    b.add_operator("ADD", [x, c], [y], {"fused_activation_function": activation})
    b.add_output(y)
    return b.build()


@pytest.mark.litert
@pytest.mark.parametrize(
    "activation, expected",
    [
        ("NONE", [-1.0, 0.5, 1.5, 3.0]),
        ("RELU", [0.0, 0.5, 1.5, 3.0]),
        ("RELU_N1_TO_1", [-1, 0.5, 1, 1]),
    ],
)
def test_add_with_fused_activation_runs_in_litert(activation: str, expected: list[float]) -> None:
    """ADD's fused activation is written as an enum and read back by name."""
    content = add_model(activation)
    model = offload.load_model(model_content=content)
    (node,) = model.main.nodes
    assert node.op == "ADD" and node.version == 1
    assert node.options.type_name == "AddOptions"
    assert node.options.fused_activation_function == activation
    (out,) = run_litert(content, np.ones((1, 4), np.float32))
    np.testing.assert_allclose(out, [expected], rtol=0, atol=1e-6)


def conv_model() -> tuple[bytes, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    weights = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 8, 8, 3), dtype=np.float32)
    w = b.add_constant("w", weights)
    bb = b.add_constant("b", bias)
    y = b.add_tensor("y", shape=(1, 4, 4, 4), dtype=np.float32)
    options = {
        "padding": "SAME",
        "stride_w": 2,
        "stride_h": 2,
        "fused_activation_function": "RELU6",
    }
    b.add_operator("CONV_2D", inputs=[x, w, bb], outputs=[y], options=options, version=1)
    b.add_output(y)
    return b.build(), weights, bias


def conv_reference(x: np.ndarray, w: np.ndarray, bias: np.ndarray) -> np.ndarray:
    # SAME padding, stride 2, 3x3 kernel on 8x8: pad 0 before and 1 after.
    padded = np.pad(x, ((0, 0), (0, 1), (0, 1), (0, 0)))
    out = np.zeros((1, 4, 4, 4), np.float64)
    for i in range(4):
        for j in range(4):
            patch = padded[0, 2 * i : 2 * i + 3, 2 * j : 2 * j + 3, :]
            out[0, i, j] = np.tensordot(w, patch, axes=([1, 2, 3], [0, 1, 2])) + bias
    return np.clip(out, 0, 6)


@pytest.mark.litert
def test_conv2d_options_round_trip_and_run_in_litert() -> None:
    """CONV_2D options come back as written; LiteRT computes the convolution they describe."""
    content, weights, bias = conv_model()
    model = offload.load_model(model_content=content)
    (node,) = model.main.nodes
    assert node.op == "CONV_2D"
    assert node.options.padding == "SAME"
    assert (node.options.stride_w, node.options.stride_h) == (2, 2)
    assert node.options.fused_activation_function == "RELU6"
    np.testing.assert_array_equal(model.main.tensors[node.inputs[1]].constant_value(), weights)
    assert model.model_type == "float32"
    x = np.random.default_rng(1).standard_normal((1, 8, 8, 3)).astype(np.float32)
    (out,) = run_litert(content, x)
    np.testing.assert_allclose(out, conv_reference(x, weights, bias), rtol=1e-5, atol=1e-5)


@pytest.mark.litert
def test_reshape_vector_option_new_shape() -> None:
    """Vector options (ReshapeOptions.new_shape) are written and read back whole."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(2, 3, 4))
    shape = b.add_constant("shape", np.array([6, 4], np.int32))
    y = b.add_tensor("y", shape=(6, 4))
    b.add_operator("RESHAPE", [x, shape], [y], {"new_shape": [6, 4]})
    b.add_output(y)
    content = b.build()
    node = offload.load_model(model_content=content).main.nodes[0]
    assert node.options.type_name == "ReshapeOptions"
    assert node.options.new_shape == (6, 4)
    x_value = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    (out,) = run_litert(content, x_value)
    np.testing.assert_array_equal(out, x_value.reshape(6, 4))


def test_squeeze_dims_vector_option() -> None:
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 3, 1))
    y = b.add_tensor("y", shape=(3,))
    b.add_operator("SQUEEZE", [x], [y], {"squeeze_dims": (0, 2)})
    b.add_output(y)
    node = offload.load_model(model_content=b.build()).main.nodes[0]
    assert node.options.squeeze_dims == (0, 2)


def fc_int8_model() -> tuple[bytes, dict[str, np.ndarray]]:
    rng = np.random.default_rng(2)
    in_scale, in_zp, out_scale, out_zp = 0.05, -3, 0.1, 2
    w_scale = np.array([0.01, 0.02, 0.015, 0.03], np.float32)
    weights = rng.integers(-127, 128, size=(4, 8), dtype=np.int8)
    bias = rng.integers(-500, 500, size=4).astype(np.int32)
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 8), dtype=np.int8, quantization=(in_scale, in_zp))
    w = b.add_constant(
        "w", weights, quantization=(w_scale, np.zeros(4, np.int64)), quantized_dimension=0
    )
    bb = b.add_constant(
        "b", bias, quantization=(in_scale * w_scale, np.zeros(4, np.int64)), quantized_dimension=0
    )
    y = b.add_tensor("y", shape=(1, 4), dtype=np.int8, quantization=(out_scale, out_zp))
    b.add_operator(
        "FULLY_CONNECTED", [x, w, bb], [y], {"fused_activation_function": "NONE"}, version=5
    )
    b.add_output(y)
    params = dict(weights=weights, bias=bias, w_scale=w_scale)
    params.update(in_scale=in_scale, in_zp=in_zp, out_scale=out_scale, out_zp=out_zp)
    return b.build(), params


@pytest.mark.litert
def test_int8_fully_connected_per_channel_runs_in_litert() -> None:
    """Per-channel quantization is written with its quantized_dimension and LiteRT uses it."""
    content, p = fc_int8_model()
    model = offload.load_model(model_content=content)
    assert model.model_type == "int8"
    node = model.main.nodes[0]
    assert node.op == "FULLY_CONNECTED" and node.version == 5
    wq = model.main.tensors[node.inputs[1]].quantization
    assert wq is not None and wq.per_channel and wq.quantized_dimension == 0
    np.testing.assert_allclose(wq.scale, p["w_scale"])
    xq = model.main.tensors[node.inputs[0]].quantization
    assert xq is not None and xq.as_tuple() == (pytest.approx(0.05), -3)

    x = np.random.default_rng(3).integers(-128, 128, size=(1, 8), dtype=np.int8)
    (out,) = run_litert(content, x)
    acc = (x.astype(np.int64) - p["in_zp"]) @ p["weights"].T.astype(np.int64) + p["bias"]
    real = acc * p["in_scale"] * p["w_scale"].astype(np.float64)
    expected = np.clip(np.round(real / p["out_scale"]) + p["out_zp"], -128, 127)
    assert out.dtype == np.int8
    np.testing.assert_allclose(out, expected, atol=1)


def test_constant_buffers_are_16_byte_aligned() -> None:
    b = ModelBuilder()
    x = b.add_input("x", shape=(3,))
    for n in (1, 3, 5, 7):  # odd sizes push later buffers off alignment unless padded
        b.add_constant(f"c{n}", np.arange(n, dtype=np.int8))
    b.add_constant("f", np.ones(5, np.float32))
    b.add_output(x)
    content = b.build()
    fb = tflite.Model.GetRootAs(content, 0)
    checked = 0
    for i in range(fb.BuffersLength()):
        buf = fb.Buffers(i)
        if buf.DataLength():
            table = buf._tab
            start = table.Vector(table.Offset(4))
            assert start % 16 == 0, f"buffer {i} data starts at {start}"
            checked += 1
    assert checked == 5


def test_metadata_and_default_signature() -> None:
    b = ModelBuilder()
    x = b.add_input("x", shape=(2,))
    y = b.add_tensor("y", shape=(2,))
    b.add_operator("RELU", [x], [y])
    b.add_output(y)
    b.add_metadata("min_runtime_version", b"1.5.0")
    model = offload.load_model(model_content=b.build())
    assert model.metadata["min_runtime_version"] == b"1.5.0"
    (sig,) = model.signatures
    assert sig.key == "serving_default"
    assert dict(sig.inputs) == {"x": 0} and dict(sig.outputs) == {"y": 1}


def test_no_signature_when_key_is_none() -> None:
    b = ModelBuilder(signature_key=None)
    x = b.add_input("x", shape=(2,))
    b.add_output(x)
    assert offload.load_model(model_content=b.build()).signatures == ()


def test_custom_op_keeps_code_and_options() -> None:
    b = ModelBuilder()
    x = b.add_input("x", shape=(2,))
    y = b.add_tensor("y", shape=(2,))
    b.add_operator("MyOp", [x], [y], custom=True, custom_options=b"\x01\x02")
    b.add_output(y)
    (node,) = offload.load_model(model_content=b.build()).main.nodes
    assert node.op == "CUSTOM" and node.custom_code == "MyOp"
    assert node.custom_options == b"\x01\x02"


def test_ops_above_127_use_the_placeholder_deprecated_code() -> None:
    b = ModelBuilder()
    x = b.add_input("x", shape=(2,))
    y = b.add_tensor("y", shape=(2,))
    b.add_operator("GELU", [x], [y], {"approximate": True})
    b.add_output(y)
    content = b.build()
    code = tflite.Model.GetRootAs(content, 0).OperatorCodes(0)
    assert code.BuiltinCode() == tflite.BuiltinOperator.GELU > 127
    assert code.DeprecatedBuiltinCode() == 127
    node = offload.load_model(model_content=content).main.nodes[0]
    assert node.op == "GELU" and node.options.approximate is True


def test_second_subgraph_is_written() -> None:
    b = ModelBuilder()
    x = b.add_input("x", shape=(1,))
    b.add_output(x)
    body = b.add_subgraph("body")
    i = body.add_input("i", shape=(1,))
    o = body.add_tensor("o", shape=(1,))
    body.add_operator("NEG", [i], [o])
    body.add_output(o)
    model = offload.load_model(model_content=b.build())
    assert [sg.name for sg in model.subgraphs] == ["main", "body"]
    assert model.subgraphs[1].nodes[0].op == "NEG"


def test_irregular_option_names() -> None:
    assert options_type_for("CONV_2D") == "Conv2DOptions"
    assert options_type_for("MAX_POOL_2D") == "Pool2DOptions"
    assert options_type_for("MEAN") == "ReducerOptions"
    assert options_type_for("UNIDIRECTIONAL_SEQUENCE_LSTM") == "UnidirectionalSequenceLSTMOptions"
    assert options_type_for("BATCH_TO_SPACE_ND") == "BatchToSpaceNDOptions"
    assert options_type_for("RELU") is None


def test_mirror_pad_mode_by_name() -> None:
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 3))
    pads = b.add_constant("pads", np.array([[0, 0], [1, 1]], np.int32))
    y = b.add_tensor("y", shape=(1, 5))
    b.add_operator("MIRROR_PAD", [x, pads], [y], {"mode": "SYMMETRIC"})
    b.add_output(y)
    node = offload.load_model(model_content=b.build()).main.nodes[0]
    assert node.options.mode == "SYMMETRIC"


# -- errors --------------------------------------------------------------------------------


def test_unknown_op_is_rejected() -> None:
    b = ModelBuilder()
    x = b.add_input("x", shape=(1,))
    with pytest.raises(ModelBuildError, match="unknown builtin op 'CONV2D'"):
        b.add_operator("CONV2D", [x], [x])


def test_unknown_option_lists_valid_fields() -> None:
    b = ModelBuilder()
    x = b.add_input("x", shape=(1,))
    with pytest.raises(ModelBuildError, match=r"unknown option 'stride'.*stride_w"):
        b.add_operator("CONV_2D", [x], [x], {"stride": 1})


def test_bad_enum_name_is_rejected() -> None:
    b = ModelBuilder()
    x = b.add_input("x", shape=(1,))
    with pytest.raises(ModelBuildError, match="'SAMEISH' is not one of"):
        b.add_operator("CONV_2D", [x], [x], {"padding": "SAMEISH"})


def test_tensor_index_out_of_range() -> None:
    b = ModelBuilder()
    x = b.add_input("x", shape=(1,))
    with pytest.raises(ModelBuildError, match=r"tensor index 5 is out of range.*1 tensors"):
        b.add_operator("RELU", [x], [5])
    with pytest.raises(ModelBuildError, match="out of range"):
        b.add_output(-1)


def test_options_on_an_op_without_options() -> None:
    b = ModelBuilder()
    x = b.add_input("x", shape=(1,))
    with pytest.raises(ModelBuildError, match="RELU: this op has no builtin options"):
        b.add_operator("RELU", [x], [x], {"alpha": 1.0})


def test_constant_shape_mismatch() -> None:
    b = ModelBuilder()
    with pytest.raises(ModelBuildError, match="holds 6 values, but data has 4"):
        b.add_constant("c", np.zeros(4, np.float32), shape=(2, 3))


def test_unknown_dtype() -> None:
    b = ModelBuilder()
    with pytest.raises(ModelBuildError, match="TensorType name"):
        b.add_tensor("t", shape=(1,), dtype="float8")


def test_save_writes_the_same_bytes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    content = add_model("RELU")
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 4), dtype=np.float32)
    c = b.add_constant("c", np.array([[-2.0, -0.5, 0.5, 2.0]], np.float32))
    y = b.add_tensor("y", shape=(1, 4), dtype=np.float32)
    b.add_operator("ADD", [x, c], [y], {"fused_activation_function": "RELU"})
    b.add_output(y)
    path = tmp_path / "add.tflite"
    b.save(path)
    assert path.read_bytes() == content
    assert struct.unpack_from("4s", content, 4)[0] == b"TFL3"


def test_tensor_type_options_take_dtypes() -> None:
    """TensorType option fields (ARG_MAX output_type) take a numpy dtype or a type name."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(2, 3))
    axis = b.add_constant("axis", np.array([1], np.int32))
    y = b.add_tensor("y", shape=(2,), dtype=np.int64)
    b.add_operator("ARG_MAX", [x, axis], [y], {"output_type": np.int64})
    b.add_output(y)
    node = offload.load_model(model_content=b.build()).main.nodes[0]
    assert node.options.output_type == "INT64"


def _one_op_model(op: str, options: dict[str, object]) -> offload.Node:
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 4))
    y = b.add_tensor("y", shape=(1, 4))
    b.add_operator(op, [x], [y], options)
    b.add_output(y)
    return offload.load_model(model_content=b.build()).main.nodes[0]


@pytest.mark.parametrize(
    ("op", "field", "name"),
    [
        ("FULLY_CONNECTED", "weights_format", "SHUFFLED4x16INT8"),
        ("FULLY_CONNECTED", "quantized_bias_type", "INT32"),
        ("LSH_PROJECTION", "type", "DENSE"),
        ("EMBEDDING_LOOKUP_SPARSE", "combiner", "SQRTN"),
        ("LSTM", "kernel_type", "BASIC"),
        ("CAST", "out_data_type", "INT16"),
        ("HASHTABLE", "key_dtype", "STRING"),
    ],
)
def test_every_enum_field_takes_a_name_and_reads_back_as_one(
    op: str, field: str, name: str
) -> None:
    """Enum option fields beyond padding and activations are written and read by name."""
    assert _one_op_model(op, {field: name}).options[field] == name


def test_unset_enum_fields_read_as_their_default_names() -> None:
    """A field left out reads as the name of the schema's default (weights_format DEFAULT)."""
    options = _one_op_model("FULLY_CONNECTED", {}).options
    assert options.weights_format == "DEFAULT" and options.fused_activation_function == "NONE"


def test_enum_fields_still_take_numbers() -> None:
    """Enum fields accept the stored number too, for values newer than the schema's names."""
    node = _one_op_model("MIRROR_PAD", {"mode": tflite.MirrorPadMode.SYMMETRIC})
    assert node.options.mode == "SYMMETRIC"


def test_option_names_lists_an_ops_fields():
    """option_names gives the fields node.options uses for an op, () for an op without any."""
    from offload.model import option_names

    assert option_names("SQUEEZE") == ("squeeze_dims",)
    assert "fused_activation_function" in option_names("ADD")
    assert option_names("PAD") == () and option_names("CEIL") == ()

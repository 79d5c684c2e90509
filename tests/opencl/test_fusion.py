"""Nodes fused into a convolution's launch (and PADs folded away) still agree with LiteRT.

Each model is built so one fusion rule applies; the test checks the rule fired (the launches
the partition lowers to) and the result against LiteRT, in float32 and half storage.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np
import pytest
from opencl_support import random_inputs, relative_error, run_litert

import offload
from offload.model import ModelBuilder
from offload_gpu_opencl._lower import lower

RNG = np.random.default_rng(11)
F = np.float32
TOLERANCE = {False: 1e-5, True: 1e-2}  # precision_loss_allowed -> max relative error


def w(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype(F)


def conv_options(stride: int = 1, padding: str = "SAME", act: str = "NONE") -> dict:
    return {
        "padding": padding,
        "stride_h": stride,
        "stride_w": stride,
        "dilation_h_factor": 1,
        "dilation_w_factor": 1,
        "fused_activation_function": act,
    }


def dw_options(stride: int = 1, padding: str = "SAME", act: str = "NONE") -> dict:
    return {**conv_options(stride, padding, act), "depth_multiplier": 1}


POOL_2X2 = {
    "padding": "VALID",
    "stride_h": 2,
    "stride_w": 2,
    "filter_height": 2,
    "filter_width": 2,
    "fused_activation_function": "NONE",
}


def conv_add_prelu() -> bytes:
    """1x1 CONV_2D -> ADD (residual: the input) -> PRELU: one matmul launch."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 9, 9, 16))
    c = b.add_tensor("c", (1, 9, 9, 16))
    s = b.add_tensor("s", (1, 9, 9, 16))
    y = b.add_tensor("y", (1, 9, 9, 16))
    wt, bias, alpha = (
        b.add_constant(n, v) for n, v in (("w", w(16, 1, 1, 16)), ("b", w(16)), ("a", w(1, 1, 16)))
    )
    b.add_operator("CONV_2D", [x, wt, bias], [c], conv_options())
    b.add_operator("ADD", [x, c], [s], {"fused_activation_function": "NONE"})
    b.add_operator("PRELU", [s, alpha], [y])
    b.add_output(y)
    return b.build()


def dw_then_relu() -> bytes:
    """3x3 DEPTHWISE (12 channels, width 10: partial channel and pixel blocks) -> RELU."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 7, 10, 12))
    d = b.add_tensor("d", (1, 7, 10, 12))
    y = b.add_tensor("y", (1, 7, 10, 12))
    wt, bias = b.add_constant("w", w(1, 3, 3, 12)), b.add_constant("b", w(12))
    b.add_operator("DEPTHWISE_CONV_2D", [x, wt, bias], [d], dw_options())
    b.add_operator("RELU", [d], [y])
    b.add_output(y)
    return b.build()


def pad_then_valid_convs() -> bytes:
    """A spatial PAD read by a stride-2 VALID DEPTHWISE and a 3x3 VALID CONV_2D: folded into
    both convolutions' padding."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 11, 9, 20))
    p = b.add_tensor("p", (1, 13, 10, 20))
    d = b.add_tensor("d", (1, 6, 4, 20))
    c = b.add_tensor("c", (1, 11, 8, 8))
    pads = b.add_constant("pads", np.array([[0, 0], [1, 1], [0, 1], [0, 0]], np.int32))
    dw, db = b.add_constant("dw", w(1, 3, 3, 20)), b.add_constant("db", w(20))
    cw, cb = b.add_constant("cw", w(8, 3, 3, 20)), b.add_constant("cb", w(8))
    b.add_operator("PAD", [x, pads], [p])
    b.add_operator("DEPTHWISE_CONV_2D", [p, dw, db], [d], dw_options(2, "VALID", "RELU6"))
    b.add_operator("CONV_2D", [p, cw, cb], [c], conv_options(1, "VALID"))
    b.add_output(d)
    b.add_output(c)
    return b.build()


def channel_padded_residual(expose: bool = False, pool: dict | None = None) -> bytes:
    """MAX_POOL -> PAD (12 -> 20 channels) added to a stride-2 conv's output, then RELU6: the
    PAD and ADD and RELU6 run in the conv's launch (residual channels past 12 read as zero).
    ``expose``: the pool's output is a model output too; ``pool``: its options."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 8, 8, 12))
    m = b.add_tensor("m", (1, 4, 4, 12))
    c = b.add_tensor("c", (1, 4, 4, 20))
    pm = b.add_tensor("pm", (1, 4, 4, 20))
    s = b.add_tensor("s", (1, 4, 4, 20))
    y = b.add_tensor("y", (1, 4, 4, 20))
    pads = b.add_constant("pads", np.array([[0, 0], [0, 0], [0, 0], [0, 8]], np.int32))
    wt, bias = b.add_constant("w", w(20, 3, 3, 12)), b.add_constant("b", w(20))
    b.add_operator("MAX_POOL_2D", [x], [m], pool or POOL_2X2)
    b.add_operator("CONV_2D", [x, wt, bias], [c], conv_options(2))
    b.add_operator("PAD", [m, pads], [pm])
    b.add_operator("ADD", [pm, c], [s], {"fused_activation_function": "NONE"})
    b.add_operator("RELU6", [s], [y])
    b.add_output(y)
    if expose:
        b.add_output(m)
    return b.build()


def shared_conv_output() -> bytes:
    """A conv output that is also a model output is not fused through (the ADD runs alone)."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 5, 5, 8))
    c = b.add_tensor("c", (1, 5, 5, 8))
    y = b.add_tensor("y", (1, 5, 5, 8))
    wt, bias = b.add_constant("w", w(8, 1, 1, 8)), b.add_constant("b", w(8))
    b.add_operator("CONV_2D", [x, wt, bias], [c], conv_options(act="RELU"))
    b.add_operator("ADD", [c, x], [y], {"fused_activation_function": "RELU"})
    b.add_output(c)
    b.add_output(y)
    return b.build()


def fully_connected_prelu() -> bytes:
    """FULLY_CONNECTED on one row (the 1 x 16 GEMV blocking) -> PRELU."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 40))
    f = b.add_tensor("f", (1, 300))
    y = b.add_tensor("y", (1, 300))
    wt, bias, alpha = (
        b.add_constant(n, v) for n, v in (("w", w(300, 40)), ("b", w(300)), ("a", w(300)))
    )
    b.add_operator("FULLY_CONNECTED", [x, wt, bias], [f], {"fused_activation_function": "NONE"})
    b.add_operator("PRELU", [f, alpha], [y])
    b.add_output(y)
    return b.build()


def pool_branch_after_the_conv(expose: bool = False) -> bytes:
    """A stride-2 CONV_2D, then (in node order) a MAX_POOL of the same input, ADD and PRELU
    (the landmark models' blocks): the pool is lowered before the conv, whose launch adds it
    (``expose``: the pool's output is a model output too)."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 8, 10, 16))
    c = b.add_tensor("c", (1, 4, 5, 16))
    m = b.add_tensor("m", (1, 4, 5, 16))
    s = b.add_tensor("s", (1, 4, 5, 16))
    y = b.add_tensor("y", (1, 4, 5, 16))
    wt, bias = b.add_constant("w", w(16, 3, 3, 16)), b.add_constant("b", w(16))
    alpha = b.add_constant("a", w(1, 1, 16))
    b.add_operator("CONV_2D", [x, wt, bias], [c], conv_options(2))
    b.add_operator("MAX_POOL_2D", [x], [m], POOL_2X2)
    b.add_operator("ADD", [c, m], [s], {"fused_activation_function": "NONE"})
    b.add_operator("PRELU", [s, alpha], [y])
    b.add_output(y)
    if expose:
        b.add_output(m)
    return b.build()


def hard_swish_after_convs(expose: bool = False) -> bytes:
    """A 1x1 CONV_2D and a 5x5 DEPTHWISE each followed by a HARD_SWISH (MobileNetV3's blocks):
    each HARD_SWISH runs in its convolution's epilogue (not when ``expose`` makes the
    convolutions' outputs model outputs too)."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 9, 11, 12))
    c = b.add_tensor("c", (1, 9, 11, 20))
    h = b.add_tensor("h", (1, 9, 11, 20))
    d = b.add_tensor("d", (1, 9, 11, 20))
    y = b.add_tensor("y", (1, 9, 11, 20))
    cw, cb = b.add_constant("cw", 3 * w(20, 1, 1, 12)), b.add_constant("cb", w(20))
    dw, db = b.add_constant("dw", w(1, 5, 5, 20)), b.add_constant("db", w(20))
    b.add_operator("CONV_2D", [x, cw, cb], [c], conv_options())
    b.add_operator("HARD_SWISH", [c], [h])
    b.add_operator("DEPTHWISE_CONV_2D", [h, dw, db], [d], dw_options())
    b.add_operator("HARD_SWISH", [d], [y])
    b.add_output(y)
    if expose:
        b.add_output(c)
        b.add_output(d)
    return b.build()


def hard_sigmoid_gate(sixth: float, expose: bool = False) -> Callable[[], bytes]:
    """MobileNetV3's squeeze-excite gate: a RELU6 1x1 CONV_2D on a pooled 1x1 tensor, then a
    MUL by the constant ``sixth``; by exactly float32 1/6 it runs in the conv's epilogue, by
    anything else alone."""

    def build() -> bytes:
        b = ModelBuilder()
        x = b.add_input("x", (1, 1, 1, 24))
        c = b.add_tensor("c", (1, 1, 1, 24))
        y = b.add_tensor("y", (1, 1, 1, 24))
        cw, cb = b.add_constant("cw", 4 * w(24, 1, 1, 24)), b.add_constant("cb", 3 + w(24))
        k = b.add_constant("k", np.array(sixth, F))
        b.add_operator("CONV_2D", [x, cw, cb], [c], conv_options(act="RELU6"))
        b.add_operator("MUL", [c, k], [y], {"fused_activation_function": "NONE"})
        b.add_output(y)
        if expose:
            b.add_output(c)
        return b.build()

    return build


def squeeze_excite(batch: int, swapped: bool, expose: bool = False) -> bytes:
    """MobileNetV3's squeeze-excite block: x pooled (MEAN), two 1x1 CONV_2Ds and a hard
    sigmoid make a gate per image and channel, MUL(x, gate) (``swapped``: MUL(gate, x)), and
    a 1x1 CONV_2D reads the product. In the GPU family the gate is one se_gate launch and the
    MUL runs in the product's A loader, not when ``expose`` makes the product a model output
    too."""
    b = ModelBuilder()
    x = b.add_input("x", (batch, 7, 6, 37))
    t = {n: b.add_tensor(n, s) for n, s in (("s", (batch, 1, 1, 37)), ("r", (batch, 1, 1, 8)),
         ("c", (batch, 1, 1, 37)), ("g", (batch, 1, 1, 37)), ("m", (batch, 7, 6, 37)),
         ("y", (batch, 7, 6, 19)))}  # fmt: skip
    axes = b.add_constant("axes", np.array([1, 2], np.int32))
    b.add_operator("MEAN", [x, axes], [t["s"]], {"keep_dims": True})
    for src, dst, ci, co, act in (("s", "r", 37, 8, "RELU"), ("r", "c", 8, 37, "RELU6")):
        cw, cb = b.add_constant(f"{dst}w", w(co, 1, 1, ci)), b.add_constant(f"{dst}b", 3 + w(co))
        b.add_operator("CONV_2D", [t[src], cw, cb], [t[dst]], conv_options(act=act))
    sixth = b.add_constant("sixth", np.array(1 / 6, F))
    b.add_operator("MUL", [t["c"], sixth], [t["g"]], {"fused_activation_function": "NONE"})
    operands = [t["g"], x] if swapped else [x, t["g"]]
    b.add_operator("MUL", operands, [t["m"]], {"fused_activation_function": "NONE"})
    pw, pb = b.add_constant("pw", w(19, 1, 1, 37)), b.add_constant("pb", w(19))
    b.add_operator("CONV_2D", [t["m"], pw, pb], [t["y"]], conv_options())
    b.add_output(t["y"])
    if expose:
        b.add_output(t["m"])
    return b.build()


def gate_for_every_image() -> bytes:
    """A gate of one row for a batch of two (input [1, 1, 1, C] against x [2, H, W, C]), the
    MUL with a fused RELU, then a 1x1 CONV_2D: the loader uses row 0 for both images."""
    b = ModelBuilder()
    x = b.add_input("x", (2, 5, 4, 11))
    g = b.add_input("g", (1, 1, 1, 11))
    m, y = b.add_tensor("m", (2, 5, 4, 11)), b.add_tensor("y", (2, 5, 4, 6))
    b.add_operator("MUL", [x, g], [m], {"fused_activation_function": "RELU"})
    pw, pb = b.add_constant("pw", w(6, 1, 1, 11)), b.add_constant("pb", w(6))
    b.add_operator("CONV_2D", [m, pw, pb], [y], conv_options())
    b.add_output(y)
    return b.build()


# model -> kernels of its launches, in order
CASES: dict[str, tuple[Callable[[], bytes], list[str]]] = {
    "conv_add_prelu": (conv_add_prelu, ["matmul_6x2"]),
    "dw_then_relu": (dw_then_relu, ["dw3x3_s1"]),
    "pad_then_valid_convs": (pad_then_valid_convs, ["dw3x3_s2", "conv2d_8x1"]),
    "channel_padded_residual": (channel_padded_residual, ["pool", "conv2d_8x1"]),
    "shared_conv_output": (shared_conv_output, ["matmul_8x1", "binary8"]),
    "fully_connected_prelu": (fully_connected_prelu, ["matmul_1x2"]),
    "hard_swish_after_convs": (hard_swish_after_convs, ["matmul_8x1", "dwconv"]),
    "pool_branch_after_the_conv": (pool_branch_after_the_conv, ["pool", "conv2d_6x2"]),
    "hard_sigmoid_gate": (hard_sigmoid_gate(1 / 6), ["matmul_1x2"]),
    "gate_times_a_quarter": (hard_sigmoid_gate(0.25), ["matmul_1x2", "binary8"]),
}


@pytest.mark.litert
@pytest.mark.parametrize("precision_loss", [False, True], ids=["float32", "half"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_chain_matches_litert(case: str, precision_loss: bool) -> None:
    """The chain lowers to the expected launches and agrees with LiteRT."""
    build, kernels = CASES[case]
    content = build()
    delegate = offload.load_delegate(
        "gpu_opencl", options={"precision_loss_allowed": precision_loss}
    )
    interp = offload.Interpreter(
        model_content=content, delegates=[delegate], allow_cpu_fallback=False
    )
    interp.allocate_tensors()
    (partition,) = interp.plan().partitions
    lowering = lower(interp.model.main, partition)
    assert [launch.kernel for launch in lowering.launches] == kernels
    assert not interp.delegation_report()["restored_to_cpu"]
    inputs = random_inputs(interp.get_input_details(), seed=5)
    for detail, value in zip(interp.get_input_details(), inputs):
        interp.set_tensor(detail["index"], value)
    interp.invoke()
    expected = run_litert(None, inputs, content=content)
    for detail, want in zip(interp.get_output_details(), expected):
        got = interp.get_tensor(detail["index"])
        rel = relative_error(got, want)
        assert rel <= TOLERANCE[precision_loss], f"{case}: {rel:.3e}\ngpu {got}\nlitert {want}"


@pytest.mark.parametrize("family", ["cpu", "gpu"])
@pytest.mark.parametrize("precision_loss", [False, True], ids=["float32", "half"])
def test_fused_activations_change_no_bit(
    family: str, precision_loss: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A HARD_SWISH, or a MUL by 1/6 after a RELU6, computed in the convolution's epilogue
    gives the bits its own launch gives in float32 storage: the same model with the
    convolutions' outputs made model outputs (which stops the fusion) agrees exactly, over
    inputs that reach the activations' bends (-3, 0, 3, 6). With half storage the fused path
    rounds the convolution's result to half once, at the end, not also before the activation:
    within half's precision of the unfused one."""
    options = {"kernel_family": family, "precision_loss_allowed": precision_loss}
    for build in (hard_swish_after_convs, lambda expose=False: hard_sigmoid_gate(1 / 6, expose)()):
        outputs = []
        for expose in (False, True):
            monkeypatch.setattr(sys.modules[__name__], "RNG", np.random.default_rng(3))
            interp = offload.Interpreter(
                model_content=build(expose=expose),
                delegates=[offload.load_delegate("gpu_opencl", options)],
                allow_cpu_fallback=False,
            )
            interp.allocate_tensors()
            (row,) = interp.delegate_kernel_stats()
            outputs.append((row["stats"]["launches"], []))
            for seed in (1, 2):
                (detail,) = interp.get_input_details()
                x = np.random.default_rng(seed).uniform(-8, 8, detail["shape"]).astype(F)
                x.flat[:8] = [-3, 0, 3, 6, -3.0001, 2.9999, 6.0001, -0.0]
                interp.set_tensor(detail["index"], x)
                interp.invoke()
                outputs[-1][1].append(interp.get_tensor(interp.get_output_details()[0]["index"]))
        (fused_launches, fused), (plain_launches, plain) = outputs
        assert fused_launches < plain_launches
        for a, b in zip(fused, plain):
            if precision_loss:
                assert relative_error(a, b) <= TOLERANCE[True]
            else:
                np.testing.assert_array_equal(a, b)


def assert_as_unfused(fused: np.ndarray, unfused: np.ndarray, precision_loss: bool) -> None:
    """The unfused bits in float32 storage; within half's precision with half storage."""
    if precision_loss:
        assert relative_error(fused, unfused) <= TOLERANCE[True]
    else:
        np.testing.assert_array_equal(fused, unfused)


def run_gated(
    content: bytes, seed: int, **options
) -> tuple[list[str], dict[str, int], np.ndarray, list]:
    """One invoke in the GPU kernel family: the kernels launched, the kernel's stats, the
    first output and the inputs."""
    interp = offload.Interpreter(
        model_content=content,
        delegates=[offload.load_delegate("gpu_opencl", {"kernel_family": "gpu", **options})],
        allow_cpu_fallback=False,
    )
    interp.allocate_tensors()
    (kernel,) = interp.delegate_kernels().values()
    inputs = random_inputs(interp.get_input_details(), seed=seed)
    for detail, value in zip(interp.get_input_details(), inputs):
        interp.set_tensor(detail["index"], value)
    interp.invoke()
    y = interp.get_tensor(interp.get_output_details()[0]["index"])
    launched = [k.function_name for k, _, _ in kernel.calls]
    return launched, kernel.stats(), y, inputs


@pytest.mark.litert
@pytest.mark.parametrize("precision_loss", [False, True], ids=["float32", "half"])
@pytest.mark.parametrize(("batch", "swapped"), [(1, False), (2, True)])
def test_squeeze_excite_gate_runs_in_the_product(
    batch: int, swapped: bool, precision_loss: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GPU family: the gate (MEAN and two 1x1 products) is one se_gate launch, and the MUL of
    x by it runs in the 1x1 product's A loader: two launches where ``fuse_gates=False`` makes
    five, and three where the product is a model output too (the MUL then runs alone). The
    results are the unfused bits in float32 storage (within half's precision with half
    storage) and LiteRT's."""
    runs = []
    for expose, fuse_gates in ((False, True), (False, False), (True, True)):
        monkeypatch.setattr(sys.modules[__name__], "RNG", np.random.default_rng(3))
        content = squeeze_excite(batch, swapped, expose)
        run = run_gated(content, 7, precision_loss_allowed=precision_loss, fuse_gates=fuse_gates)
        runs.append((*run, content))
    (fused, stats, y, inputs, content), *unfused_runs = runs
    assert (stats["gates_fused"], stats["squeezes_fused"]) == (1, 1)
    assert fused[0] == "se_gate" and fused[1].startswith("tgemm_") and len(fused) == 2, fused
    for (launched, counts, unfused, _, _), squeezes, launches in zip(unfused_runs, (0, 1), (5, 3)):
        assert (counts["gates_fused"], counts["squeezes_fused"]) == (0, squeezes)
        assert len(launched) == launches, launched
        assert_as_unfused(y, unfused, precision_loss)
    (want,) = run_litert(None, inputs, content=content)
    assert relative_error(y, want) <= TOLERANCE[precision_loss]


@pytest.mark.litert
def test_one_gate_row_serves_every_image() -> None:
    """A gate shared by the batch, with the MUL's RELU: fused (no binary launch), the unfused
    bits, and LiteRT's results."""
    content = gate_for_every_image()
    fused, stats, y, inputs = run_gated(content, 9)
    plain, unfused_stats, unfused, _ = run_gated(content, 9, fuse_gates=False)
    assert (stats["gates_fused"], unfused_stats["gates_fused"]) == (1, 0)
    assert len(fused) == len(plain) - 1
    np.testing.assert_array_equal(y, unfused)
    (want,) = run_litert(None, inputs, content=content)
    assert relative_error(y, want) <= TOLERANCE[False]


def squeeze_gate(width: int) -> bytes:
    """A squeeze-excite gate alone: x [1, 3, 3, 512] pooled, squeezed to ``width`` channels
    (RELU) and expanded back; the gate is the model's output."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 3, 3, 512))
    s, r = b.add_tensor("s", (1, 1, 1, 512)), b.add_tensor("r", (1, 1, 1, width))
    g = b.add_tensor("g", (1, 1, 1, 512))
    b.add_operator(
        "MEAN", [x, b.add_constant("axes", np.array([1, 2], np.int32))], [s], {"keep_dims": True}
    )
    for src, dst, ci, co, act in ((s, r, 512, width, "RELU"), (r, g, width, 512, "NONE")):
        cw, cb = b.add_constant(f"w{dst}", w(co, 1, 1, ci)), b.add_constant(f"b{dst}", w(co))
        b.add_operator("CONV_2D", [src, cw, cb], [dst], conv_options(act=act))
    b.add_output(g)
    return b.build()


@pytest.mark.litert
@pytest.mark.parametrize(("width", "fused"), [(256, True), (257, False)])
def test_a_gate_is_one_launch_only_within_one_groups_work(width: int, fused: bool) -> None:
    """Squeezing 512 channels to 256 and back is SQUEEZE_MACS multiply-adds per image: one
    se_gate launch. One channel more leaves the MEAN and the two products their own launches
    (a classifier head is such a chain, and work for many groups). LiteRT's results either way."""
    content = squeeze_gate(width)
    launched, stats, y, inputs = run_gated(content, 4)
    assert stats["squeezes_fused"] == int(fused)
    assert len(launched) == (1 if fused else 3) and (launched[0] == "se_gate") == fused, launched
    (want,) = run_litert(None, inputs, content=content)
    assert relative_error(y, want) <= TOLERANCE[False]


POOL_3X3 = {**POOL_2X2, "padding": "SAME", "filter_height": 3, "filter_width": 3}


@pytest.mark.litert
@pytest.mark.parametrize("precision_loss", [False, True], ids=["float32", "half"])
@pytest.mark.parametrize("build", [channel_padded_residual, pool_branch_after_the_conv])
def test_max_pool_residual_is_read_by_the_product(
    build: Callable[..., bytes], precision_loss: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GPU family: a MAX_POOL_2D residual whose 2x2 windows tile its input is taken from the
    pool's input by the tiled convolution (one launch, no pool), through a channel PAD too,
    giving the bits of the pool's own launch (the same model with the pool's output made a
    model output) in float32 storage, and LiteRT's results."""
    outputs = []
    for expose in (False, True):
        monkeypatch.setattr(sys.modules[__name__], "RNG", np.random.default_rng(8))
        content = build(expose=expose)
        launched, _, y, inputs = run_gated(content, 6, precision_loss_allowed=precision_loss)
        outputs.append((launched, y, content))
    (fused, y, content), (apart, unfused, _) = outputs
    assert len(fused) == 1 and fused[0].startswith("tconv_"), fused
    assert apart == ["pool", *fused], apart
    assert_as_unfused(y, unfused, precision_loss)
    (want,) = run_litert(None, inputs, content=content)
    assert relative_error(y, want) <= TOLERANCE[precision_loss]


def test_overlapping_pool_windows_keep_their_launch() -> None:
    """A 3x3 stride-2 MAX_POOL_2D residual (windows overlap, SAME padding) keeps its launch."""
    launched, _, _, _ = run_gated(channel_padded_residual(pool=POOL_3X3), 6)
    assert launched[0] == "pool" and len(launched) == 2, launched

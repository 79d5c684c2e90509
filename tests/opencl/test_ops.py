"""Single-op models (written with offload's ModelBuilder) on gpu_opencl agree with LiteRT."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from opencl_support import random_inputs, relative_error, run_litert

import offload
from offload.model import ModelBuilder

RNG = np.random.default_rng(7)
F = np.float32


def w(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype(F)


def single(
    op: str, in_shapes, out_shape, options=None, consts=(), version=1, in_dtype=F, out_dtype=F
) -> bytes:
    """One op: runtime inputs of in_shapes, then constants (arrays or None for -1)."""
    b = ModelBuilder()
    ins = [b.add_input(f"x{i}", s, in_dtype) for i, s in enumerate(in_shapes)]
    for i, c in enumerate(consts):
        ins.append(-1 if c is None else b.add_constant(f"c{i}", c))
    y = b.add_tensor("y", out_shape, out_dtype)
    b.add_operator(op, ins, [y], options, version=version)
    b.add_output(y)
    return b.build()


def conv(stride=1, dilation=1, padding="SAME", act="RELU6", k=3) -> bytes:
    oh = 9 if padding == "SAME" and stride == 1 else (9 + stride - 1) // stride
    if padding == "VALID":
        oh = (9 - (k - 1) * dilation - 1) // stride + 1
    return single(
        "CONV_2D",
        [(1, 9, 9, 5)],
        (1, oh, oh, 11),
        {
            "padding": padding,
            "stride_h": stride,
            "stride_w": stride,
            "dilation_h_factor": dilation,
            "dilation_w_factor": dilation,
            "fused_activation_function": act,
        },
        consts=[w(11, k, k, 5), w(11)],
    )


def transpose_conv() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", (1, 4, 4, 3))
    shape = b.add_constant("shape", np.array([1, 8, 8, 6], np.int32))
    wt = b.add_constant("w", w(6, 3, 3, 3))
    y = b.add_tensor("y", (1, 8, 8, 6))
    b.add_operator(
        "TRANSPOSE_CONV", [shape, wt, x], [y], {"padding": "SAME", "stride_h": 2, "stride_w": 2}
    )
    b.add_output(y)
    return b.build()


def quantized_add() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", (1, 4, 4, 8))
    qx = b.add_tensor("qx", (1, 4, 4, 8), np.int8, quantization=(0.01, 3))
    qc = b.add_constant(
        "c", RNG.integers(-128, 127, (1, 4, 4, 8)).astype(np.int8), quantization=(0.02, -1)
    )
    qy = b.add_tensor("qy", (1, 4, 4, 8), np.int8, quantization=(0.03, 0))
    y = b.add_tensor("y", (1, 4, 4, 8))
    b.add_operator("QUANTIZE", [x], [qx])
    b.add_operator("ADD", [qx, qc], [qy], {"fused_activation_function": "RELU"}, version=2)
    b.add_operator("DEQUANTIZE", [qy], [y], version=2)
    b.add_output(y)
    return b.build()


def quantized_depth_to_space(out_quantization=(0.01, 3)) -> bytes:
    """QUANTIZE, int8 DEPTH_TO_SPACE, DEQUANTIZE: the moved values stay on the int8 grid."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 3, 3, 16))
    qx = b.add_tensor("qx", (1, 3, 3, 16), np.int8, quantization=(0.01, 3))
    qy = b.add_tensor("qy", (1, 6, 6, 4), np.int8, quantization=out_quantization)
    y = b.add_tensor("y", (1, 6, 6, 4))
    b.add_operator("QUANTIZE", [x], [qx])
    b.add_operator("DEPTH_TO_SPACE", [qx], [qy], {"block_size": 2})
    b.add_operator("DEQUANTIZE", [qy], [y], version=2)
    b.add_output(y)
    return b.build()


def mean(shape, axes, out_shape, keep_dims: bool) -> bytes:
    return single(
        "MEAN",
        [shape],
        out_shape,
        {"keep_dims": keep_dims},
        consts=[np.array(axes, np.int32)],
    )


CASES: dict[str, Callable[[], bytes]] = {
    "conv_same_relu6": lambda: conv(),
    "conv_stride2_valid": lambda: conv(stride=2, padding="VALID", act="NONE"),
    # LiteRT's builtin CONV_2D ignores a fused TANH/SIGMOID (its GPU delegate applies it), so
    # the oracle can only check the activations both paths agree on.
    "conv_dilated": lambda: conv(dilation=2, padding="VALID", act="RELU"),
    "conv_1x1": lambda: conv(k=1, act="RELU_N1_TO_1"),
    # Dilated rows only: every window is inside, so conv2d reads each kernel row's taps as one
    # contiguous run (its fast path), rows ky * 2 apart.
    "conv_dilated_rows": lambda: single(
        "CONV_2D",
        [(1, 12, 12, 5)],
        (1, 8, 10, 11),
        {
            "padding": "VALID",
            "stride_h": 1,
            "stride_w": 1,
            "dilation_h_factor": 2,
            "dilation_w_factor": 1,
            "fused_activation_function": "NONE",
        },
        consts=[w(11, 3, 3, 5), w(11)],
    ),
    "depthwise_multiplier2": lambda: single(
        "DEPTHWISE_CONV_2D",
        [(1, 7, 7, 3)],
        (1, 4, 4, 6),
        {
            "padding": "SAME",
            "stride_h": 2,
            "stride_w": 2,
            "depth_multiplier": 2,
            "fused_activation_function": "RELU",
        },
        consts=[w(1, 3, 3, 6), w(6)],
    ),
    "depthwise_v2_dilated": lambda: single(
        "DEPTHWISE_CONV_2D",
        [(1, 9, 9, 10)],
        (1, 9, 9, 10),
        {
            "padding": "SAME",
            "stride_h": 1,
            "stride_w": 1,
            "depth_multiplier": 1,
            "dilation_h_factor": 2,
            "dilation_w_factor": 2,
        },
        consts=[w(1, 3, 3, 10), w(10)],
        version=2,
    ),
    "fully_connected": lambda: single(
        "FULLY_CONNECTED",
        [(3, 20)],
        (3, 13),
        {"fused_activation_function": "RELU"},
        consts=[w(13, 20), w(13)],
    ),
    "transpose_conv": transpose_conv,
    "average_pool": lambda: single(
        "AVERAGE_POOL_2D",
        [(1, 7, 7, 4)],
        (1, 4, 4, 4),
        {"padding": "SAME", "stride_h": 2, "stride_w": 2, "filter_height": 3, "filter_width": 3},
    ),
    "max_pool_valid": lambda: single(
        "MAX_POOL_2D",
        [(1, 7, 7, 4)],
        (1, 3, 3, 4),
        {"padding": "VALID", "stride_h": 2, "stride_w": 2, "filter_height": 2, "filter_width": 2},
    ),
    # The mean over height and width (a global average pool), as image classifiers end.
    "mean_spatial": lambda: mean((1, 6, 5, 13), [1, 2], (1, 1, 1, 13), keep_dims=True),
    "mean_spatial_negative_axes": lambda: mean((2, 4, 3, 9), [-2, -3], (2, 9), keep_dims=False),
    "depth_to_space": lambda: single(
        "DEPTH_TO_SPACE", [(2, 3, 4, 12)], (2, 6, 8, 3), {"block_size": 2}
    ),
    "depth_to_space_3": lambda: single(
        "DEPTH_TO_SPACE", [(1, 2, 3, 18)], (1, 6, 9, 2), {"block_size": 3}
    ),
    "quantized_depth_to_space": quantized_depth_to_space,
    "hard_swish": lambda: single("HARD_SWISH", [(1, 5, 5, 7)], (1, 5, 5, 7)),
    "mul_broadcast": lambda: single("MUL", [(1, 5, 5, 4), (1, 1, 5, 1)], (1, 5, 5, 4)),
    "sub_const": lambda: single("SUB", [(2, 6)], (2, 6), consts=[w(6)]),
    "maximum": lambda: single("MAXIMUM", [(3, 4), (3, 4)], (3, 4)),
    "minimum": lambda: single("MINIMUM", [(3, 4)], (3, 4), consts=[w(1)]),
    "prelu": lambda: single("PRELU", [(1, 4, 4, 6)], (1, 4, 4, 6), consts=[w(1, 1, 6)]),
    "relu6": lambda: single("RELU6", [(2, 9)], (2, 9)),
    "logistic": lambda: single("LOGISTIC", [(2, 9)], (2, 9)),
    "exp": lambda: single("EXP", [(2, 9)], (2, 9)),
    "softmax": lambda: single("SOFTMAX", [(3, 17)], (3, 17), {"beta": 1.0}),
    "concat_channels": lambda: single(
        "CONCATENATION", [(1, 3, 3, 2), (1, 3, 3, 5)], (1, 3, 3, 7), {"axis": 3}
    ),
    "concat_rows": lambda: single(
        "CONCATENATION", [(1, 2, 3, 2), (1, 4, 3, 2)], (1, 6, 3, 2), {"axis": 1}
    ),
    "pad": lambda: single(
        "PAD",
        [(1, 3, 3, 2)],
        (1, 6, 4, 2),
        consts=[np.array([[0, 0], [1, 2], [0, 1], [0, 0]], np.int32)],
    ),
    "reshape": lambda: single(
        "RESHAPE", [(1, 4, 6)], (2, 12), consts=[np.array([2, 12], np.int32)]
    ),
    "strided_slice_shrink": lambda: single(
        "STRIDED_SLICE",
        [(2, 5, 6)],
        (5, 3),
        {"begin_mask": 2, "end_mask": 2, "shrink_axis_mask": 1},
        consts=[
            np.array([1, 0, 0], np.int32),
            np.array([2, 0, 6], np.int32),
            np.array([1, 1, 2], np.int32),
        ],
    ),
    "strided_slice": lambda: single(
        "STRIDED_SLICE",
        [(1, 8, 9, 4)],
        (1, 3, 4, 3),
        {"begin_mask": 0, "end_mask": 0, "shrink_axis_mask": 0},
        consts=[
            np.array([0, 1, 8, -1], np.int32),
            np.array([1, 8, 1, 0], np.int32),
            np.array([1, 3, -2, -1], np.int32),
        ],
    ),
    "resize_align_corners": lambda: single(
        "RESIZE_BILINEAR",
        [(1, 4, 5, 3)],
        (1, 7, 9, 3),
        {"align_corners": True, "half_pixel_centers": False},
        consts=[np.array([7, 9], np.int32)],
    ),
    "resize_half_pixel": lambda: single(
        "RESIZE_BILINEAR",
        [(1, 4, 5, 3)],
        (1, 8, 10, 3),
        {"align_corners": False, "half_pixel_centers": True},
        consts=[np.array([8, 10], np.int32)],
        version=3,
    ),
    "logical_and": lambda: single(
        "LOGICAL_AND", [(2, 5), (2, 5)], (2, 5), in_dtype=np.bool_, out_dtype=np.bool_
    ),
    "quantized_add": quantized_add,
}
# Quantized results may differ by one quantization step from LiteRT's integer kernels.
TOLERANCE = {"quantized_add": 0.03 / 2.5}


@pytest.mark.litert
@pytest.mark.parametrize("case", sorted(CASES))
def test_op_matches_litert(case: str) -> None:
    """Each op, alone in a model, is delegated and within 1e-5 (relative) of LiteRT."""
    content = CASES[case]()
    interp = offload.Interpreter(
        model_content=content, delegates=["gpu_opencl"], allow_cpu_fallback=False
    )
    interp.allocate_tensors()
    inputs = random_inputs(interp.get_input_details(), seed=3)
    for detail, value in zip(interp.get_input_details(), inputs):
        interp.set_tensor(detail["index"], value)
    interp.invoke()
    expected = run_litert(None, inputs, content=content)
    for detail, want in zip(interp.get_output_details(), expected):
        got = interp.get_tensor(detail["index"])
        assert got.shape == want.shape and got.dtype == want.dtype
        rel = relative_error(got, want)
        assert rel <= TOLERANCE.get(case, 1e-5), f"{case}: {rel:.3e}\ngpu {got}\nlitert {want}"


@pytest.mark.parametrize(
    ("axes", "out_shape"), [([3], (2, 4, 4, 1)), ([0, 1, 2], (1, 1, 1, 6)), ([1], (2, 1, 4, 6))]
)
def test_mean_over_other_axes_stays_on_the_cpu_with_the_reason(axes, out_shape) -> None:
    """gpu_opencl computes the mean over height and width only; any other mean is left to the
    CPU with the reason, and the model still runs."""
    content = mean((2, 4, 4, 6), axes, out_shape, keep_dims=True)
    interp = offload.Interpreter(model_content=content, delegates=["gpu_opencl"])
    reasons = interp.plan().fallback_summary()["MEAN"]["reasons"]["gpu_opencl"]
    assert any("only the mean over height and width" in r for r in reasons), reasons
    interp.allocate_tensors()
    interp.invoke()


@pytest.mark.litert
def test_hard_swish_over_its_whole_range() -> None:
    """HARD_SWISH on both sides of its bends (-3 and 3), at them, and far out, as LiteRT."""
    content = single("HARD_SWISH", [(2, 3, 5, 16)], (2, 3, 5, 16))
    values = np.linspace(-8, 8, 480, dtype=F).reshape(2, 3, 5, 16)
    values.flat[:4] = [-3, 3, 0, -0.0]
    interp = offload.Interpreter(
        model_content=content, delegates=["gpu_opencl"], allow_cpu_fallback=False
    )
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], values)
    interp.invoke()
    got = interp.get_tensor(interp.get_output_details()[0]["index"])
    (want,) = run_litert(None, [values], content=content)
    assert relative_error(got, want) <= 1e-6


def test_depth_to_space_across_scales_stays_on_the_cpu() -> None:
    """LiteRT moves the raw int8 codes; with another output scale the float view would not."""
    content = quantized_depth_to_space(out_quantization=(0.02, 0))
    interp = offload.Interpreter(model_content=content, delegates=["gpu_opencl"])
    reasons = interp.plan().fallback_summary()["DEPTH_TO_SPACE"]["reasons"]["gpu_opencl"]
    assert any("copies raw codes without rescaling" in r for r in reasons), reasons

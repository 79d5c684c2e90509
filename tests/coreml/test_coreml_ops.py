"""Each Core ML op conversion against the CPU reference, on single-op models (numpy-evaluated
MIL programs; runs anywhere), and each LiteRT constraint giving its reason."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

builder = pytest.importorskip("offload.model.builder", reason="needs offload.model.builder")

from ._util import TOLERANCE, check_partitions, delegate  # noqa: E402

RNG = np.random.default_rng(5)


def x(*shape: int) -> tuple[str, np.ndarray]:
    """A runtime input of this shape."""
    return "x", RNG.uniform(-2, 2, shape).astype(np.float32)


def c(value: Any, dtype: Any = np.float32) -> tuple[str, np.ndarray]:
    """A constant input."""
    return "c", np.asarray(value, dtype=dtype)


def w(*shape: int) -> tuple[str, np.ndarray]:
    """Constant float weights."""
    return c(RNG.uniform(-1, 1, shape))


def single_op(
    op: str,
    ins: list[Any],
    out_shape: tuple[int, ...],
    options: dict | None = None,
    version: int = 1,
) -> bytes:
    b = builder.ModelBuilder()
    idx = []
    for k, spec in enumerate(ins):
        if spec is None:
            idx.append(-1)
        elif spec[0] == "c":
            idx.append(b.add_constant(f"c{k}", spec[1]))
        else:
            idx.append(b.add_input(f"x{k}", spec[1].shape, np.float32))
    y = b.add_tensor("y", out_shape, np.float32)
    b.add_operator(op, idx, [y], options or {}, version=version)
    b.add_output(y)
    return b.build()


def conv_opts(
    padding: str = "SAME", s: int = 1, d: int = 1, act: str = "NONE", **extra: Any
) -> dict:
    return {
        "padding": padding,
        "stride_h": s,
        "stride_w": s,
        "dilation_h_factor": d,
        "dilation_w_factor": d,
        "fused_activation_function": act,
        **extra,
    }


def pool_opts(padding: str, k: int, s: int) -> dict:
    return {
        "padding": padding,
        "stride_h": s,
        "stride_w": s,
        "filter_height": k,
        "filter_width": k,
        "fused_activation_function": "NONE",
    }


def resize(align: bool, half: bool) -> dict:
    return {"align_corners": align, "half_pixel_centers": half}


ACT = {"fused_activation_function": "RELU"}
NONE = {"fused_activation_function": "NONE"}

SUPPORTED = [
    (
        "conv_same_relu",
        "CONV_2D",
        [x(1, 9, 9, 3), w(4, 3, 3, 3), w(4)],
        (1, 9, 9, 4),
        conv_opts(act="RELU"),
        1,
    ),
    (
        "conv_valid_s2_relu6",
        "CONV_2D",
        [x(1, 10, 11, 3), w(5, 3, 2, 3), w(5)],
        (1, 4, 5, 5),
        conv_opts("VALID", s=2, act="RELU6"),
        1,
    ),
    (
        "conv_same_s2_even",
        "CONV_2D",
        [x(1, 8, 8, 2), w(3, 5, 5, 2), w(3)],
        (1, 4, 4, 3),
        conv_opts(s=2),
        1,
    ),
    (
        "conv_dilated_tanh",
        "CONV_2D",
        [x(1, 9, 9, 2), w(3, 3, 3, 2), w(3)],
        (1, 9, 9, 3),
        conv_opts(d=2, act="TANH"),
        1,
    ),
    ("conv_no_bias", "CONV_2D", [x(1, 6, 6, 4), w(2, 1, 1, 4), None], (1, 6, 6, 2), conv_opts(), 1),
    (
        "depthwise_s2_m2",
        "DEPTHWISE_CONV_2D",
        [x(1, 7, 7, 3), w(1, 3, 3, 6), w(6)],
        (1, 4, 4, 6),
        conv_opts(s=2, act="RELU_N1_TO_1", depth_multiplier=2),
        1,
    ),
    (
        "depthwise_v2_dilated",
        "DEPTHWISE_CONV_2D",
        [x(1, 9, 9, 4), w(1, 3, 3, 4), w(4)],
        (1, 9, 9, 4),
        conv_opts(d=2, depth_multiplier=1),
        2,
    ),
    (
        "fc_4d_input",
        "FULLY_CONNECTED",
        [x(1, 1, 1, 8), w(5, 8), w(5)],
        (1, 5),
        # Not TANH: LiteRT refuses a float FULLY_CONNECTED with it, and so does the reference.
        {"fused_activation_function": "RELU6", "keep_num_dims": False},
        1,
    ),
    (
        "fc_keep_dims",
        "FULLY_CONNECTED",
        [x(1, 1, 8), w(5, 8), w(5)],
        (1, 1, 5),
        {"fused_activation_function": "NONE", "keep_num_dims": True},
        5,
    ),
    ("fc_no_bias_v6", "FULLY_CONNECTED", [x(1, 8), w(3, 8), None], (1, 3), ACT, 6),
    (
        "avg_pool_same_odd",
        "AVERAGE_POOL_2D",
        [x(1, 7, 7, 3)],
        (1, 4, 4, 3),
        pool_opts("SAME", 3, 2),
        1,
    ),
    (
        "avg_pool_valid",
        "AVERAGE_POOL_2D",
        [x(1, 8, 8, 2)],
        (1, 4, 4, 2),
        pool_opts("VALID", 2, 2),
        1,
    ),
    ("max_pool_same", "MAX_POOL_2D", [x(1, 7, 6, 3)], (1, 4, 3, 3), pool_opts("SAME", 3, 2), 1),
    ("max_pool_valid", "MAX_POOL_2D", [x(1, 8, 8, 2)], (1, 4, 4, 2), pool_opts("VALID", 2, 2), 1),
    ("add_same_shape_relu", "ADD", [x(1, 5, 5, 4), x(1, 5, 5, 4)], (1, 5, 5, 4), ACT, 1),
    ("add_per_channel_const", "ADD", [x(1, 5, 5, 4), w(4)], (1, 5, 5, 4), NONE, 1),
    ("add_per_pixel", "ADD", [x(1, 5, 5, 4), x(1, 5, 5, 1)], (1, 5, 5, 4), NONE, 1),
    ("add_scalar_first", "ADD", [w(1), x(1, 5, 5, 4)], (1, 5, 5, 4), NONE, 1),
    ("add_rank3", "ADD", [x(1, 6, 16), w(16)], (1, 6, 16), NONE, 1),
    ("mul_per_channel_runtime", "MUL", [x(1, 5, 5, 4), x(1, 1, 1, 4)], (1, 5, 5, 4), ACT, 1),
    ("mul_scalar", "MUL", [x(1, 5, 5, 4), w()], (1, 5, 5, 4), NONE, 1),
    (
        "concat_channels",
        "CONCATENATION",
        [x(1, 4, 4, 3), x(1, 4, 4, 5)],
        (1, 4, 4, 8),
        {"axis": 3, "fused_activation_function": "NONE"},
        1,
    ),
    (
        "concat_channels_neg",
        "CONCATENATION",
        [x(1, 4, 4, 3), w(1, 4, 4, 2)],
        (1, 4, 4, 5),
        {"axis": -1, "fused_activation_function": "NONE"},
        1,
    ),
    (
        "concat_rank2",
        "CONCATENATION",
        [x(1, 3), x(1, 5)],
        (1, 8),
        {"axis": 1, "fused_activation_function": "NONE"},
        1,
    ),
    (
        "pad_hw",
        "PAD",
        [x(1, 4, 5, 3), c([[0, 0], [1, 2], [0, 3], [0, 0]], np.int32)],
        (1, 7, 8, 3),
        None,
        1,
    ),
    (
        "padv2_value",
        "PADV2",
        [x(1, 4, 5, 3), c([[0, 0], [2, 1], [1, 1], [0, 0]], np.int32), c(-1.5)],
        (1, 7, 7, 3),
        None,
        1,
    ),
    (
        "mirror_pad_reflect",
        "MIRROR_PAD",
        [x(1, 4, 5, 3), c([[0, 0], [1, 2], [2, 1], [0, 0]], np.int32)],
        (1, 7, 8, 3),
        {"mode": "REFLECT"},
        1,
    ),
    (
        "mean_hw_keep",
        "MEAN",
        [x(1, 5, 6, 4), c([1, 2], np.int32)],
        (1, 1, 1, 4),
        {"keep_dims": True},
        1,
    ),
    ("mean_hw_drop", "MEAN", [x(1, 5, 6, 4), c([1, 2], np.int32)], (1, 4), {"keep_dims": False}, 1),
    (
        "mean_channels_drop",
        "MEAN",
        [x(1, 5, 6, 4), c([3], np.int32)],
        (1, 5, 6),
        {"keep_dims": False},
        1,
    ),
    (
        "reshape_4d_to_3d",
        "RESHAPE",
        [x(1, 4, 4, 8), c([1, 16, 8], np.int32)],
        (1, 16, 8),
        {"new_shape": [1, 16, 8]},
        1,
    ),
    (
        "reshape_4d_to_4d",
        "RESHAPE",
        [x(1, 2, 3, 4), c([1, 4, 3, 2], np.int32)],
        (1, 4, 3, 2),
        {"new_shape": [1, 4, 3, 2]},
        1,
    ),
    (
        "reshape_2d_to_4d",
        "RESHAPE",
        [x(1, 24), c([1, 2, 3, 4], np.int32)],
        (1, 2, 3, 4),
        {"new_shape": [1, 2, 3, 4]},
        1,
    ),
    (
        "resize_half_pixel_up",
        "RESIZE_BILINEAR",
        [x(1, 5, 4, 3), c([9, 7], np.int32)],
        (1, 9, 7, 3),
        resize(False, True),
        1,
    ),
    (
        "resize_align_corners",
        "RESIZE_BILINEAR",
        [x(1, 5, 4, 3), c([9, 7], np.int32)],
        (1, 9, 7, 3),
        resize(True, False),
        1,
    ),
    (
        "resize_legacy_down",
        "RESIZE_BILINEAR",
        [x(1, 8, 7, 2), c([3, 5], np.int32)],
        (1, 3, 5, 2),
        resize(False, False),
        1,
    ),
    ("softmax_rank2", "SOFTMAX", [x(1, 10)], (1, 10), {"beta": 1.0}, 1),
    ("softmax_channels", "SOFTMAX", [x(1, 2, 3, 6)], (1, 2, 3, 6), {"beta": 1.0}, 1),
    ("hard_swish", "HARD_SWISH", [x(1, 4, 4, 3)], (1, 4, 4, 3), None, 1),
    ("logistic", "LOGISTIC", [x(1, 4, 4, 3)], (1, 4, 4, 3), None, 1),
    ("tanh", "TANH", [x(1, 4, 4, 3)], (1, 4, 4, 3), None, 1),
    ("relu", "RELU", [x(1, 4, 4, 3)], (1, 4, 4, 3), None, 1),
    ("relu6", "RELU6", [x(1, 4, 4, 3)], (1, 4, 4, 3), None, 1),
    ("relu_n1_to_1", "RELU_N1_TO_1", [x(1, 4, 4, 3)], (1, 4, 4, 3), None, 1),
    ("relu_rank2", "RELU", [x(2, 7)], (2, 7), None, 1),
    (
        "transpose_conv_same_s2",
        "TRANSPOSE_CONV",
        [c([1, 8, 8, 5], np.int32), w(5, 3, 3, 3), x(1, 4, 4, 3)],
        (1, 8, 8, 5),
        {"padding": "SAME", "stride_h": 2, "stride_w": 2},
        1,
    ),
    (
        "transpose_conv_valid_s2",
        "TRANSPOSE_CONV",
        [c([1, 9, 9, 2], np.int32), w(2, 3, 3, 3), x(1, 4, 4, 3)],
        (1, 9, 9, 2),
        {"padding": "VALID", "stride_h": 2, "stride_w": 2},
        1,
    ),
    (
        "transpose_conv_same_s1_even_kernel",
        "TRANSPOSE_CONV",
        [c([1, 5, 5, 2], np.int32), w(2, 4, 4, 3), x(1, 5, 5, 3)],
        (1, 5, 5, 2),
        {"padding": "SAME", "stride_h": 1, "stride_w": 1},
        1,
    ),
]


@pytest.mark.parametrize(
    "op,ins,out_shape,options,version",
    [pytest.param(*case[1:], id=case[0]) for case in SUPPORTED],
)
def test_op_matches_cpu_reference(op, ins, out_shape, options, version):
    """The converted program, evaluated with numpy, matches the CPU reference within 1e-4."""
    content = single_op(op, ins, out_shape, options, version)
    checked = check_partitions(content, low=-3, high=3, min_nodes_per_partition=1)
    plan = checked.plan
    assert [p.nodes for p in plan.partitions] == [(0,)], plan.node_reasons
    assert checked.errors, "no output was compared"
    for key, err in checked.errors.items():
        assert err <= TOLERANCE, f"{op}: partition/tensor {key} relative error {err:.2e}"


def test_float16_weights_are_folded():
    """float16 weights behind DEQUANTIZE reach the delegate folded: float32 program constants,
    not inputs, and no DEQUANTIZE in the partition."""
    b = builder.ModelBuilder()
    xi = b.add_input("x", (1, 6, 6, 3), np.float32)
    w16 = b.add_constant("w16", RNG.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float16))
    b16 = b.add_constant("b16", RNG.uniform(-1, 1, (4,)).astype(np.float16))
    wf = b.add_tensor("w", (4, 3, 3, 3), np.float32)
    bf = b.add_tensor("b", (4,), np.float32)
    y = b.add_tensor("y", (1, 6, 6, 4), np.float32)
    b.add_operator("DEQUANTIZE", [w16], [wf], version=3)
    b.add_operator("DEQUANTIZE", [b16], [bf], version=3)
    b.add_operator("CONV_2D", [xi, wf, bf], [y], conv_opts(act="RELU"))
    b.add_output(y)
    checked = check_partitions(b.build(), min_nodes_per_partition=1)
    assert checked.plan.model_type == "float16"
    assert checked.plan.folded == (0, 1)
    assert [p.nodes for p in checked.plan.partitions] == [(2,)]
    (converted,) = checked.programs
    assert [name for _, name in converted.inputs] == ["in_0"]
    assert max(checked.errors.values()) <= TOLERANCE


def test_edges_only_transpose():
    """A chain of 4-D ops is NCHW inside: transposes only at the input and the output."""
    b = builder.ModelBuilder()
    t = b.add_input("x", (1, 8, 8, 3), np.float32)
    for k in range(3):
        wk = b.add_constant(f"w{k}", RNG.uniform(-1, 1, (3, 3, 3, 3)).astype(np.float32))
        y = b.add_tensor(f"y{k}", (1, 8, 8, 3), np.float32)
        b.add_operator("CONV_2D", [t, wk, -1], [y], conv_opts(act="RELU"))
        z = b.add_tensor(f"z{k}", (1, 8, 8, 3), np.float32)
        b.add_operator("ADD", [y, t], [z], NONE)
        t = z
    b.add_output(t)
    checked = check_partitions(b.build())
    ops = [
        op.op_type
        for op in checked.programs[0].program.functions["main"].operations
        if op.op_type != "const"
    ]
    assert ops.count("transpose") == 2, ops
    assert max(checked.errors.values()) <= TOLERANCE


REJECTED = [
    (
        "add_row_broadcast",
        "ADD",
        [x(1, 5, 5, 4), x(1, 1, 5, 4)],
        (1, 5, 5, 4),
        NONE,
        1,
        "broadcast",
    ),
    (
        "mul_partial_channels",
        "MUL",
        [x(1, 5, 5, 4), x(1, 5, 1, 4)],
        (1, 5, 5, 4),
        NONE,
        1,
        "broadcast",
    ),
    (
        "concat_spatial",
        "CONCATENATION",
        [x(1, 4, 4, 3), x(1, 2, 4, 3)],
        (1, 6, 4, 3),
        {"axis": 1, "fused_activation_function": "NONE"},
        1,
        "channel (last) axis only",
    ),
    (
        "pad_channels",
        "PAD",
        [x(1, 4, 4, 3), c([[0, 0], [1, 1], [1, 1], [0, 2]], np.int32)],
        (1, 6, 6, 5),
        None,
        1,
        "only H and W may be padded",
    ),
    (
        "pad_3d",
        "PAD",
        [x(1, 4, 3), c([[0, 0], [1, 1], [0, 0]], np.int32)],
        (1, 6, 3),
        None,
        1,
        "must be 4-D",
    ),
    (
        "pad_runtime_paddings",
        "PAD",
        [x(1, 4, 4, 3), ("x", np.zeros((4, 2), np.float32))],
        (1, 4, 4, 3),
        None,
        1,
        "",
    ),
    (
        "mirror_pad_symmetric",
        "MIRROR_PAD",
        [x(1, 4, 4, 3), c([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32)],
        (1, 6, 6, 3),
        {"mode": "SYMMETRIC"},
        1,
        "REFLECT mode only",
    ),
    (
        "conv_runtime_weights",
        "CONV_2D",
        [x(1, 6, 6, 3), x(2, 3, 3, 3), w(2)],
        (1, 6, 6, 2),
        conv_opts(),
        1,
        "must be constant",
    ),
    ("fc_batch2", "FULLY_CONNECTED", [x(2, 8), w(3, 8), w(3)], (2, 3), NONE, 1, "batch 1 only"),
    ("fc_v7", "FULLY_CONNECTED", [x(1, 8), w(3, 8), w(3)], (1, 3), NONE, 7, "version 7"),
    ("softmax_beta", "SOFTMAX", [x(1, 10)], (1, 10), {"beta": 2.0}, 1, "beta"),
    (
        "max_pool_fused_relu",
        "MAX_POOL_2D",
        [x(1, 4, 4, 2)],
        (1, 2, 2, 2),
        {**pool_opts("VALID", 2, 2), "fused_activation_function": "RELU"},
        1,
        "fused_activations",
    ),
    (
        "resize_v3",
        "RESIZE_BILINEAR",
        [x(1, 4, 4, 2), c([8, 8], np.int32)],
        (1, 8, 8, 2),
        resize(False, True),
        3,
        "version 3",
    ),
    (
        "prelu",
        "PRELU",
        [x(1, 4, 4, 2), w(1, 1, 2)],
        (1, 4, 4, 2),
        None,
        1,
        "op PRELU is not supported",
    ),
]


@pytest.mark.parametrize(
    "op,ins,out_shape,options,version,reason",
    [pytest.param(*case[1:], id=case[0]) for case in REJECTED],
)
def test_constraint_gives_reason(op, ins, out_shape, options, version, reason):
    """A node outside LiteRT's Core ML constraints stays on the CPU with a named reason."""
    import offload

    content = single_op(op, ins, out_shape, options, version)
    plan = offload.Interpreter(
        model_content=content, experimental_delegates=[delegate(min_nodes_per_partition=1)]
    ).plan()
    assert plan.partitions == []
    found = plan.node_reasons["coreml"][0]
    assert reason in found, found

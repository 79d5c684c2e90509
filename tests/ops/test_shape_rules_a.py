"""Shape rules of ADD_N .. ONES_LIKE: ``output_shapes`` gives the shapes the CPU kernel's
``run`` produces, and refuses (ValueError) inputs that no kernel could take.

Each case builds a one-op model and asks the rule twice, as the interpreter does: at
``allocate_tensors`` (only constant inputs known: a shape that hangs on a runtime value is
None) and at invoke (every input value known: every shape must be given).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pytest

from offload import load_model
from offload._graph import DimensionMetadata, Node, Sparsity, Subgraph, Tensor
from offload.geometry import geometry
from offload.ops import kernel_class
from offload.ops._base import Shape, ShapeContext
from offload.ops.densify import Densify, densify

builder = pytest.importorskip("offload.model.builder", reason="needs offload.model.builder")

RNG = np.random.default_rng(5)


class In(NamedTuple):
    """One operator input: a runtime input unless ``const``, a state tensor if ``variable``,
    omitted if ``value`` is None; ``q`` is (scale, zero_point)."""

    value: np.ndarray | None
    const: bool = False
    q: tuple[float, int] | None = None
    variable: bool = False


def c(value: Any, dtype: Any = np.int32) -> In:
    return In(np.asarray(value, dtype), const=True)


def x(*shape: int, dtype: Any = np.float32) -> In:
    """A runtime input of random values."""
    if np.dtype(dtype).kind == "f":
        return In(RNG.standard_normal(shape).astype(dtype))
    return In(RNG.integers(0, 3, shape).astype(dtype))


def w(*shape: int) -> In:
    """Constant float weights."""
    return In(RNG.standard_normal(shape).astype(np.float32), const=True)


OMITTED = In(None)


def build(
    op: str, ins: Sequence[In], outs: Sequence[Any], options: dict | None, version: int
) -> bytes:
    b = builder.ModelBuilder()
    indices = []
    for k, i in enumerate(ins):
        if i.value is None:
            indices.append(-1)
        elif i.const:
            indices.append(b.add_constant(f"c{k}", i.value, quantization=i.q))
        elif i.variable:
            indices.append(b.add_tensor(f"s{k}", i.value.shape, i.value.dtype, is_variable=True))
        else:
            indices.append(b.add_input(f"x{k}", i.value.shape, i.value.dtype, quantization=i.q))
    # The declared output shapes are placeholders: the rule must not read them.
    ys = [b.add_tensor(f"y{k}", (1,), dtype) for k, dtype in enumerate(outs)]
    b.add_operator(op, indices, ys, options or {}, version=version)
    for y in ys:
        b.add_output(y)
    return b.build()


def rule(sg: Subgraph, node: Node, values: Sequence[np.ndarray | None] | None = None) -> Any:
    """The rule's answer: with constants only (``values`` None), or with every value known."""
    shapes = [None if t < 0 else sg.tensors[t].shape for t in node.inputs]

    def constant(position: int) -> np.ndarray | None:
        if values is not None:
            return values[position]
        tensor = sg.tensors[node.inputs[position]]
        return tensor.constant_value() if tensor.is_constant else None

    return kernel_class(node).output_shapes(ShapeContext(node, shapes, constant))


def check(
    op: str,
    ins: Sequence[In],
    outs: Sequence[Any] = (np.float32,),
    options: dict | None = None,
    version: int = 1,
    dynamic: bool = False,
) -> list[Shape]:
    """Rule and kernel agree on ``op``; with ``dynamic`` the planning-time rule must say None
    (a shape that depends on a runtime value). Returns the kernel's output shapes."""
    sg = load_model(model_content=build(op, ins, outs, options, version)).main
    node = sg.nodes[0]
    values = [None if i.value is None else i.value.copy() for i in ins]
    result = kernel_class(node)(node, sg).run(*values)
    actual = [np.shape(r) for r in (result if isinstance(result, (list, tuple)) else [result])]
    at_planning = rule(sg, node)
    if dynamic:
        assert list(at_planning) == [None] * len(actual)
    else:
        assert [tuple(s) for s in at_planning] == actual
    assert [tuple(s) for s in rule(sg, node, values)] == actual
    return actual


def refuse(
    op: str,
    ins: Sequence[In],
    match: str,
    outs: Sequence[Any] = (np.float32,),
    options: dict | None = None,
    version: int = 1,
) -> None:
    """The planning-time rule rejects the inputs with a ValueError matching ``match``."""
    sg = load_model(model_content=build(op, ins, outs, options, version)).main
    with pytest.raises(ValueError, match=match):
        rule(sg, sg.nodes[0])


# --- elementwise and same-shape ops ------------------------------------------------------


def test_same_shape_ops_keep_the_input_shape() -> None:
    """CAST, COMPLEX_ABS, ONES_LIKE, DEQUANTIZE, L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION
    and LOG_SOFTMAX give the input's shape, scalars included where LiteRT takes them."""
    for shape in [(2, 3), ()]:
        check("CAST", [x(*shape)], outs=[np.int32])
    check("LOG_SOFTMAX", [x(2, 3)])
    z = (RNG.standard_normal((2, 3)) + 1j * RNG.standard_normal((2, 3))).astype(np.complex64)
    check("COMPLEX_ABS", [In(z)])
    check("DEQUANTIZE", [In(np.ones((2, 3), np.int8), q=(0.5, 1))], version=2)
    check("DEQUANTIZE", [In(np.ones((4,), np.float16), const=True)], version=3)
    check("L2_NORMALIZATION", [x(3)])
    check("L2_NORMALIZATION", [x(1, 1, 1, 2, 3)])
    lrn = {"radius": 1, "bias": 1.0, "alpha": 0.5, "beta": 0.75}
    check("LOCAL_RESPONSE_NORMALIZATION", [x(1, 2, 2, 5)], options=lrn)


def test_same_shape_ops_refuse_what_litert_refuses() -> None:
    """L2_NORMALIZATION and LOG_SOFTMAX need a rank >= 1 input (LiteRT's LOG_SOFTMAX reads a
    scalar's last dimension out of bounds), LOCAL_RESPONSE_NORMALIZATION a 4-D one."""
    refuse("L2_NORMALIZATION", [x()], "rank >= 1")
    refuse("LOG_SOFTMAX", [x()], "rank >= 1")
    refuse("LOCAL_RESPONSE_NORMALIZATION", [x(2, 5)], "4-D", options={"radius": 1})


def test_add_n() -> None:
    """ADD_N sums equal shapes; LiteRT neither broadcasts nor takes a single input."""
    check("ADD_N", [x(2, 3), x(2, 3), x(2, 3)])
    refuse("ADD_N", [x(2, 3), x(1, 3)], r"one shape, found \[\[2, 3\], \[1, 3\]\]")
    refuse("ADD_N", [x(2, 3)], "at least 2 inputs")


# --- axes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["ARG_MAX", "ARG_MIN"])
def test_arg_max_min(op: str) -> None:
    """The axis is dropped (negative counts from the end); a runtime axis leaves it open."""
    opts = {"output_type": np.int32}
    assert check(op, [x(2, 3, 4), c(1)], [np.int32], opts) == [(2, 4)]
    assert check(op, [x(2, 3, 4), c([-1])], [np.int32], opts) == [(2, 3)]
    assert check(op, [x(3), c(0, np.int64)], [np.int64], {"output_type": np.int64}) == [()]
    check(op, [x(2, 3), In(np.array(0, np.int32))], [np.int32], opts, dynamic=True)
    refuse(op, [x(2, 3), c(2)], r"axis in \[-2, 2\), found 2", [np.int32], opts)
    refuse(op, [x(2, 3), c([0, 1])], "single axis value, found 2", [np.int32], opts)
    refuse(op, [x(), c(0)], "rank >= 1", [np.int32], opts)


def test_cumsum() -> None:
    """CUMSUM keeps the shape even for a runtime axis; a constant axis must be in range."""
    check("CUMSUM", [x(2, 3), c(-1)], options={"exclusive": True})
    check("CUMSUM", [x(2, 3), In(np.array([1], np.int32))])
    refuse("CUMSUM", [x(2, 3), c(2)], r"axis in \[-2, 2\)")
    refuse("CUMSUM", [x(), c(0)], "rank >= 1")


def test_expand_dims() -> None:
    """The new axis counts from rank + 1 when negative; a runtime axis leaves it open."""
    assert check("EXPAND_DIMS", [x(2, 3), c(0)]) == [(1, 2, 3)]
    assert check("EXPAND_DIMS", [x(2, 3), c([-1])]) == [(2, 3, 1)]
    assert check("EXPAND_DIMS", [x(), c(0)]) == [(1,)]
    check("EXPAND_DIMS", [x(2, 3), In(np.array(2, np.int32))], dynamic=True)
    refuse("EXPAND_DIMS", [x(2, 3), c(3)], r"axis in \[-3, 3\), found 3")
    refuse("EXPAND_DIMS", [x(2, 3), c([0, 1])], "single axis value")


# --- generated shapes: the values a memory bomb would abuse -------------------------------


def test_fill() -> None:
    """FILL's shape is its dims input, known at planning only when constant."""
    assert check("FILL", [c([2, 3]), c(1.5, np.float32)]) == [(2, 3)]
    # An empty constant has no buffer, so the model holds it as a runtime input.
    check("FILL", [c(np.zeros(0)), c(1.5, np.float32)], dynamic=True)
    assert check("FILL", [c([0, 4]), c(1.5, np.float32)]) == [(0, 4)]
    check("FILL", [In(np.array([2, 3], np.int32)), c(1.5, np.float32)], dynamic=True)
    refuse("FILL", [c([2, -3]), c(1.5, np.float32)], r"non-negative dims, found \[2, -3\]")
    refuse("FILL", [c([[2, 3]]), c(1.5, np.float32)], "1-D dims")
    refuse("FILL", [c([2, 3]), c([1.5], np.float32)], "scalar value")


def test_broadcast_to() -> None:
    """BROADCAST_TO's shape is its target, which the input must broadcast to."""
    assert check("BROADCAST_TO", [x(3, 1), c([2, 3, 4])], version=2) == [(2, 3, 4)]
    assert check("BROADCAST_TO", [x(), c([2, 2])], version=2) == [(2, 2)]
    assert check("BROADCAST_TO", [x(1), c([0, 3])], version=2) == [(0, 3)]
    check("BROADCAST_TO", [x(3, 1), In(np.array([2, 3, 4], np.int32))], version=2, dynamic=True)
    refuse("BROADCAST_TO", [x(1), c([-2, 1])], "non-negative dims", version=2)
    refuse("BROADCAST_TO", [x(2, 3, 1), c([3, 4])], "broadcasts to", version=2)
    refuse("BROADCAST_TO", [x(0), c([2, 1])], "broadcasts to", version=2)
    refuse("BROADCAST_TO", [x(1), c([[2, 3]])], "1-D shape input", version=2)


@pytest.mark.parametrize("axis", [-1, 0, 1, 2])
def test_one_hot(axis: int) -> None:
    """The depth goes in at ``axis`` (-1: last); a runtime depth leaves it open."""
    ins = [In(np.array([[0, 3], [1, -1]], np.int32)), c(4), c(1.0, np.float32), c(0.0, np.float32)]
    shape = [2, 2]
    shape.insert(2 if axis == -1 else axis, 4)
    assert check("ONE_HOT", ins, options={"axis": axis}) == [tuple(shape)]


def test_one_hot_depth() -> None:
    """ONE_HOT's depth must be one non-negative value; only -1 counts from the end."""
    on_off = [c(1.0, np.float32), c(0.0, np.float32)]
    ids = In(np.array([0, 2], np.int32))
    last = {"axis": -1}
    assert check("ONE_HOT", [ids, c([3]), *on_off], options=last) == [(2, 3)]
    check("ONE_HOT", [ids, In(np.array(3, np.int32)), *on_off], options=last, dynamic=True)
    refuse("ONE_HOT", [ids, c(-3), *on_off], "depth >= 0, found -3")
    refuse("ONE_HOT", [ids, c([3, 4]), *on_off], "single depth value")
    refuse(
        "ONE_HOT", [ids, c(3), *on_off], r"axis -1 or in \[0, 1\], found -2", options={"axis": -2}
    )


# --- joins and gathers -------------------------------------------------------------------


def test_concatenation() -> None:
    """Sizes add up along the axis (negative counts from the end), empty inputs included."""
    assert check("CONCATENATION", [x(2, 1), x(2, 3), x(2, 0)], options={"axis": -1}) == [(2, 4)]
    assert check("CONCATENATION", [x(1, 2), x(3, 2)], options={"axis": 0}) == [(4, 2)]


def test_concatenation_refuses_mismatches() -> None:
    """Non-axis dims must agree, ranks too; scalars have no axis (LiteRT refuses them)."""
    refuse(
        "CONCATENATION",
        [x(2, 3), x(3, 3)],
        r"equal to \[2, 3\] except on axis 1",
        options={"axis": 1},
    )
    refuse("CONCATENATION", [x(2, 3), x(2, 3, 1)], "except on axis", options={"axis": 1})
    refuse("CONCATENATION", [x(2, 3), x(2, 3)], r"axis in \[-2, 2\), found 2", options={"axis": 2})
    refuse("CONCATENATION", [x(), x()], "rank >= 1", options={"axis": 0})


@pytest.mark.parametrize(
    "shape,positions,options,expected",
    [
        ((3, 4), [2, 0], {"axis": 0}, (2, 4)),
        ((3, 4), [[2, 0, 1]], {"axis": -1}, (3, 1, 3)),
        ((3, 4), 1, {"axis": 1}, (3,)),
        ((2, 3, 4), [[0, 1], [1, 2]], {"axis": 2, "batch_dims": 1}, (2, 3, 2)),
        ((2, 3, 4), [[0, 1], [1, 2]], {"axis": 2, "batch_dims": -1}, (2, 3, 2)),
        ((2, 3, 4), [0, 1], {"axis": 1, "batch_dims": 1}, (2, 4)),
    ],
)
def test_gather(shape, positions, options, expected) -> None:
    """GATHER: input[:axis] + positions[batch_dims:] + input[axis + 1:]."""
    assert check("GATHER", [x(*shape), c(positions)], options=options) == [expected]


def test_gather_refuses_bad_axes() -> None:
    """The axis must be in range, batch_dims at most the axis and shared by both inputs."""
    pos = c([[0, 1], [1, 2]])
    refuse("GATHER", [x(2, 3), pos], r"axis in \[-2, 2\)", options={"axis": 2})
    refuse("GATHER", [x(2, 3), pos], "batch_dims in", options={"axis": 1, "batch_dims": 2})
    refuse("GATHER", [x(3, 3), pos], "batch_dims in", options={"axis": 1, "batch_dims": 1})


def test_gather_nd() -> None:
    """GATHER_ND: indices.shape[:-1] + params.shape[depth:]."""
    assert check("GATHER_ND", [x(3, 4, 2), c([[1, 0], [2, 3]])]) == [(2, 2)]
    assert check("GATHER_ND", [x(3, 4, 2), c([[[1]], [[0]]])]) == [(2, 1, 4, 2)]
    refuse("GATHER_ND", [x(3, 4), c([[1, 0, 0]])], r"index depth in \[1, 2\]")
    refuse("GATHER_ND", [x(3, 4), c(1)], "rank >= 1")
    refuse("GATHER_ND", [x(), c([0])], "rank >= 1")


def test_embedding_lookup() -> None:
    """One table row per id; LiteRT takes 1-D ids and a table of rank >= 2."""
    ids = In(np.array([4, 0, 4], np.int32))
    assert check("EMBEDDING_LOOKUP", [ids, w(5, 4)]) == [(3, 4)]
    assert check("EMBEDDING_LOOKUP", [ids, w(5, 2, 2)]) == [(3, 2, 2)]
    refuse("EMBEDDING_LOOKUP", [In(np.array([[0, 1]], np.int32)), w(5, 4)], "1-D vector")
    refuse("EMBEDDING_LOOKUP", [ids, w(5)], "rank >= 2")


# --- padding and block moves -------------------------------------------------------------


def test_mirror_pad() -> None:
    """Each dim grows by its paddings, at most size (SYMMETRIC) or size - 1 (REFLECT)."""
    sym, ref = {"mode": "SYMMETRIC"}, {"mode": "REFLECT"}
    assert check("MIRROR_PAD", [x(2, 3), c([[2, 0], [1, 3]])], options=sym) == [(4, 7)]
    assert check("MIRROR_PAD", [x(2, 3), c([[1, 1], [2, 2]], np.int64)], options=ref) == [(4, 7)]
    check("MIRROR_PAD", [x(), c(np.zeros((0, 2)))], options=sym, dynamic=True)
    check("MIRROR_PAD", [x(2, 3), In(np.array([[1, 1], [0, 0]], np.int32))], dynamic=True)
    refuse(
        "MIRROR_PAD", [x(2, 3), c([[2, 0], [0, 0]])], "REFLECT paddings of at most 1", options=ref
    )
    refuse("MIRROR_PAD", [x(2, 3), c([[3, 0], [0, 0]])], "at most 2", options=sym)
    refuse("MIRROR_PAD", [x(2, 3), c([[-1, 0], [0, 0]])], "non-negative", options=sym)
    refuse("MIRROR_PAD", [x(2, 3), c([[1, 1, 1], [2, 2, 2]])], r"shape \[2, 2\]", options=sym)


def test_depth_to_space() -> None:
    """Channels become block x block tiles: (N, H*b, W*b, C/b^2)."""
    assert check("DEPTH_TO_SPACE", [x(1, 2, 3, 8)], options={"block_size": 2}) == [(1, 4, 6, 2)]
    refuse("DEPTH_TO_SPACE", [x(1, 2, 3, 6)], "multiple of block_size", options={"block_size": 2})
    refuse("DEPTH_TO_SPACE", [x(1, 2, 3, 6)], "block_size >= 1", options={"block_size": 0})
    refuse("DEPTH_TO_SPACE", [x(2, 3, 8)], "4-D", options={"block_size": 2})


def test_batch_to_space_nd() -> None:
    """The batch shrinks by the block, spatial dims grow by it less the crops (3-D or 4-D)."""
    b2s = "BATCH_TO_SPACE_ND"
    assert check(b2s, [x(4, 2, 2, 3), c([2, 2]), c([[0, 0], [0, 1]])]) == [(1, 4, 3, 3)]
    assert check(b2s, [x(4, 2, 3), c([2]), c([[0, 1]])]) == [(2, 3, 3)]
    runtime_block = In(np.array([2, 2], np.int32))
    check(b2s, [x(4, 2, 2, 3), runtime_block, c([[0, 0], [0, 1]])], dynamic=True)


def test_batch_to_space_nd_refuses() -> None:
    """Blocks must be positive and divide the batch; crops non-negative and not too large."""
    b2s, none = "BATCH_TO_SPACE_ND", c([[0, 0], [0, 0]])
    refuse(b2s, [x(3, 2, 2, 3), c([2, 2]), none], "multiple of the block")
    refuse(b2s, [x(4, 2, 2, 3), c([-2, -2]), none], "block sizes >= 1")
    refuse(b2s, [x(4, 2, 2, 3), c([2, 2]), c([[0, -1], [0, 0]])], "non-negative crops")
    refuse(b2s, [x(4, 2, 2, 3), c([2, 2]), c([[3, 2], [0, 0]])], "no larger than")
    refuse(b2s, [x(4, 2, 2, 3), c([4]), c([[0, 0]])], r"block_shape \[2\]")
    refuse(b2s, [x(4, 2), c([2]), c([[0, 0]])], "3-D or 4-D")


# --- the convolution family --------------------------------------------------------------


def conv_opts(padding: str = "SAME", stride: int = 1, dilation: int = 1) -> dict:
    return {
        "padding": padding,
        "stride_h": stride,
        "stride_w": stride,
        "dilation_h_factor": dilation,
        "dilation_w_factor": dilation,
    }


def test_valid_padding_truncates_like_cpp() -> None:
    """ComputeOutSize divides in C++: a filter up to a stride too large gives 0, not -1."""
    assert (geometry("VALID", (1, 1), (4, 4), (2, 2)).out_h) == 0
    assert (geometry("VALID", (1, 1), (3, 3), (1, 1)).out_h) == -1


@pytest.mark.parametrize(
    "padding,stride,dilation,in_shape,f_shape",
    [
        ("SAME", 1, 1, (1, 5, 6, 3), (4, 3, 3, 3)),
        ("SAME", 2, 1, (2, 7, 6, 3), (4, 3, 2, 3)),
        ("VALID", 1, 2, (1, 9, 8, 3), (4, 3, 3, 3)),
        ("VALID", 2, 1, (1, 8, 8, 4), (6, 3, 3, 2)),  # two groups
        ("VALID", 1, 1, (1, 2, 2, 3), (4, 3, 3, 3)),  # an empty output, as in LiteRT
        ("SAME", 1, 1, (0, 4, 4, 3), (4, 3, 3, 3)),  # an empty batch
    ],
)
def test_conv_2d(padding, stride, dilation, in_shape, f_shape) -> None:
    """CONV_2D: (N, out_h, out_w, filter out-channels), grouped or not."""
    opts = conv_opts(padding, stride, dilation)
    check("CONV_2D", [x(*in_shape), w(*f_shape), w(f_shape[0])], options=opts)


def test_conv_2d_optional_bias_and_runtime_filter() -> None:
    """The bias may be left out; a runtime filter's shape is as good as a constant's."""
    check("CONV_2D", [x(1, 4, 4, 3), w(2, 3, 3, 3)], options=conv_opts())
    check("CONV_2D", [x(1, 4, 4, 3), w(2, 3, 3, 3), OMITTED], options=conv_opts())
    check("CONV_2D", [x(1, 4, 4, 3), x(2, 3, 3, 3), w(2)], options=conv_opts("VALID"))


@pytest.mark.parametrize(
    "in_shape,f_shape,bias,options,match",
    [
        ((1, 4, 4, 3), (2, 3, 3, 4), 2, {}, "multiple of the filter's in-channels 4, found 3"),
        ((1, 4, 4, 4), (5, 3, 3, 2), 5, {}, "multiple of the 2 groups"),
        ((1, 4, 4, 3), (2, 3, 3, 3), 2, {"stride": 0}, "strides and dilations >= 1"),
        ((1, 4, 4, 3), (2, 3, 3, 3), 2, {"dilation": 0}, "strides and dilations >= 1"),
        ((1, 1, 1, 3), (2, 3, 3, 3), 2, {"padding": "VALID"}, "no larger than the VALID-padded"),
        ((1, 4, 4, 3), (2, 3, 3, 3), 3, {}, "2 bias values"),
        ((4, 4, 3), (2, 3, 3, 3), 2, {}, "4-D NHWC"),
        ((1, 0, 4, 3), (2, 3, 3, 3), 2, {}, "heights and widths >= 1"),
    ],
)
def test_conv_2d_refuses(in_shape, f_shape, bias, options, match) -> None:
    """Channels, groups, strides, dilations, filter fit, input size and bias are checked."""
    refuse("CONV_2D", [x(*in_shape), w(*f_shape), w(bias)], match, options=conv_opts(**options))


@pytest.mark.parametrize(
    "padding,stride,dilation,in_shape,f_shape",
    [
        ("SAME", 1, 1, (1, 5, 6, 3), (1, 3, 3, 3)),
        ("SAME", 2, 1, (2, 7, 6, 3), (1, 3, 2, 6)),  # depth multiplier 2
        ("VALID", 1, 2, (1, 9, 8, 4), (1, 3, 3, 4)),
        ("VALID", 2, 1, (1, 1, 1, 3), (1, 4, 4, 3)),  # an empty output, as in LiteRT
    ],
)
def test_depthwise_conv_2d(padding, stride, dilation, in_shape, f_shape) -> None:
    """DEPTHWISE_CONV_2D: (N, out_h, out_w, filter channels); the multiplier is out / in."""
    opts = {**conv_opts(padding, stride, dilation), "depth_multiplier": f_shape[3] // in_shape[3]}
    check("DEPTHWISE_CONV_2D", [x(*in_shape), w(*f_shape), w(f_shape[3])], options=opts)
    check("DEPTHWISE_CONV_2D", [x(*in_shape), w(*f_shape)], options=opts)


@pytest.mark.parametrize(
    "f_shape,bias,options,match",
    [
        ((2, 3, 3, 3), 3, {}, r"\[1, H, W, C\]"),
        ((1, 3, 3, 4), 4, {}, "multiple of the input channels 3"),
        ((1, 3, 3, 3), 3, {"stride": 0}, "strides and dilations >= 1"),
        ((1, 3, 3, 3), 4, {}, "3 bias values"),
    ],
)
def test_depthwise_conv_2d_refuses(f_shape, bias, options, match) -> None:
    """The filter is [1, H, W, C*M] with C*M a multiple of the input channels."""
    ins = [x(1, 4, 4, 3), w(*f_shape), w(bias)]
    refuse("DEPTHWISE_CONV_2D", ins, match, options=conv_opts(**options))


@pytest.mark.parametrize(
    "in_shape,units_depth,keep,expected",
    [
        ((2, 3, 4), (5, 4), False, (6, 5)),
        ((2, 3, 4), (5, 4), True, (2, 3, 5)),
        ((2, 3, 4), (5, 6), False, (4, 5)),  # rows of the weights' depth, across the last dim
        ((4,), (5, 4), True, (5,)),
        ((4,), (5, 4), False, (1, 5)),
        ((0, 3, 4), (5, 4), True, (0, 3, 5)),
    ],
)
def test_fully_connected(in_shape, units_depth, keep, expected) -> None:
    """keep_num_dims replaces the last dim by the units, else the input flattens to rows."""
    opts = {"keep_num_dims": keep}
    assert check(
        "FULLY_CONNECTED", [x(*in_shape), w(*units_depth), w(units_depth[0])], options=opts
    ) == [expected]
    assert check("FULLY_CONNECTED", [x(*in_shape), w(*units_depth)], options=opts) == [expected]
    assert check("FULLY_CONNECTED", [x(*in_shape), w(*units_depth), OMITTED], options=opts) == [
        expected
    ]


def test_fully_connected_refuses() -> None:
    """2-D weights of depth >= 1, a whole number of rows, the last dim kept, one bias a unit."""
    fc = "FULLY_CONNECTED"
    refuse(fc, [x(2, 4), w(5, 4, 1), w(5)], "2-D weights")
    refuse(
        fc,
        [x(2, 3, 4), w(5, 6), w(5)],
        "last dim is the weights' depth 6",
        options={"keep_num_dims": True},
    )
    refuse(fc, [x(2, 3, 4), w(5, 5), w(5)], "multiple of the weights' depth 5")
    refuse(fc, [x(2, 4), w(5, 4), w(4)], "5 bias values")
    refuse(fc, [x(2, 0), w(5, 0), w(5)], "depth >= 1")


@pytest.mark.parametrize(
    "lhs,rhs,adj,expected",
    [
        ((2, 3, 4), (4, 5), (False, False), (2, 3, 5)),
        ((2, 1, 3, 4), (3, 4, 5), (False, False), (2, 3, 3, 5)),
        ((2, 4, 3), (2, 5, 4), (True, True), (2, 3, 5)),
        ((1, 1, 1, 3, 4), (4, 5), (False, False), (1, 1, 1, 3, 5)),
        ((0, 3, 4), (1, 4, 5), (False, False), (0, 3, 5)),
    ],
)
def test_batch_matmul(lhs, rhs, adj, expected) -> None:
    """Batch dims broadcast; then lhs rows by rhs columns, after the adjoints."""
    opts = {"adj_x": adj[0], "adj_y": adj[1]}
    assert check("BATCH_MATMUL", [x(*lhs), x(*rhs)], options=opts) == [expected]
    assert check("BATCH_MATMUL", [x(*lhs), w(*rhs)], options=opts) == [expected]


def test_batch_matmul_refuses() -> None:
    """Accumulation depths must agree, batch dims broadcast, ranks be 2 to 5."""
    bmm = "BATCH_MATMUL"
    refuse(bmm, [x(2, 3, 4), x(3, 5)], "accumulation depth, found 4 and 3")
    refuse(bmm, [x(2, 3, 4), x(3, 4, 5)], "batch dimensions that broadcast")
    refuse(bmm, [x(4), x(4, 5)], "rank 2 to 5")
    refuse(bmm, [x(1, 1, 1, 1, 3, 4), x(4, 5)], "rank 2 to 5")


# --- recurrent ---------------------------------------------------------------------------


def full_lstm(n_batch=2, n_input=5, n_cell=4, n_output=3, **change: In) -> list[In]:
    """The 24 inputs of a full float LSTM cell with projection, peepholes and layer norm;
    ``change`` replaces inputs by position (``i7=...``)."""
    ins = [x(n_batch, n_input)]
    ins += [w(n_cell, n_input) for _ in range(4)]
    ins += [w(n_cell, n_output) for _ in range(4)]
    ins += [w(n_cell) for _ in range(3)]  # peepholes
    ins += [w(n_cell) for _ in range(4)]  # biases
    ins += [w(n_output, n_cell), w(n_output)]  # projection
    ins += [
        In(np.zeros((n_batch, n_output), np.float32), variable=True),
        In(np.zeros((n_batch, n_cell), np.float32), variable=True),
    ]
    ins += [w(n_cell) for _ in range(4)]  # layer norm
    for key, value in change.items():
        ins[int(key[1:])] = value
    return ins


LSTM_OPTIONS = {"fused_activation_function": "TANH", "cell_clip": 0.0, "proj_clip": 0.0}


def test_lstm_full_cell() -> None:
    """A full LSTM step gives [batch, n_output] (the projection's size when there is one)."""
    assert check("LSTM", full_lstm(), options=LSTM_OPTIONS) == [(2, 3)]
    no_cifg_input = {f"i{k}": OMITTED for k in (1, 5, 9, 12, 20)}
    assert check("LSTM", full_lstm(**no_cifg_input), options=LSTM_OPTIONS) == [(2, 3)]
    no_projection = full_lstm(n_output=4, i16=OMITTED, i17=OMITTED)
    assert check("LSTM", no_projection[:20], options=LSTM_OPTIONS) == [(2, 4)]


def test_lstm_full_cell_refuses() -> None:
    """Every present weight and both states must fit n_input, n_cell and n_output."""
    opts = LSTM_OPTIONS
    refuse("LSTM", full_lstm(i0=x(2, 6)), r"\[n_cell, 6\]", options=opts)
    refuse("LSTM", full_lstm(i6=w(4, 2)), r"input 6 of shape \[4, 3\]", options=opts)
    refuse("LSTM", full_lstm(i16=w(3, 5)), r"input 16 of shape \[3, 4\]", options=opts)
    state = In(np.zeros((2, 5), np.float32), variable=True)
    refuse("LSTM", full_lstm(i19=state), "state input 19 of 2 x 4 elements", options=opts)
    refuse("LSTM", full_lstm(i0=x(1, 2, 5)), "2-D input", options=opts)
    refuse("LSTM", full_lstm()[:5], "20 or 24 inputs", options=opts)


def test_lstm_basic_cell() -> None:
    """The BASIC kernel's four outputs: activation, state, concat and pre-activations."""
    batch, depth, units = 2, 3, 4
    ins = [
        x(batch, depth),
        In(np.zeros((batch, units), np.float32)),
        w(4 * units, depth + units),
        w(4 * units),
        In(np.zeros((batch, units), np.float32)),
    ]
    opts = {"kernel_type": "BASIC", "fused_activation_function": "TANH"}
    shapes = check("LSTM", ins, outs=[np.float32] * 4, options=opts, version=2)
    assert shapes == [(2, 4), (2, 4), (2, 7), (2, 16)]
    ins[2] = w(4 * units, depth)
    refuse("LSTM", ins, "weights of shape", outs=[np.float32] * 4, options=opts, version=2)


# --- ops the model builder cannot write -------------------------------------------------


def test_ones_like_keeps_the_input_shape() -> None:
    """ONES_LIKE gives the input's shape (the builder's schema predates the op)."""
    for shape in [(2, 3), ()]:
        t = Tensor(0, "x", shape, shape, np.dtype(np.float32), "FLOAT32", None, None, None)
        out = Tensor(1, "y", (1,), (1,), np.dtype(np.float32), "FLOAT32", None, None, None)
        node = Node(0, "ONES_LIKE", 1, (0,), (1,))
        sg = Subgraph(0, "main", (t, out), (node,), (0,), (1,))
        ctx = ShapeContext(node, [shape], lambda position: None)
        assert kernel_class(node).output_shapes(ctx) == [shape]
        assert kernel_class(node)(node, sg).run(np.zeros(shape, np.float32)).shape == shape


def test_densify_gives_the_dense_shape() -> None:
    """DENSIFY's output is the sparse constant's declared (dense) shape."""
    meta = (
        DimensionMetadata("DENSE", 2, None, None),
        DimensionMetadata("SPARSE_CSR", 0, np.array([0, 1, 2]), np.array([0, 1])),
    )
    values = np.array([1, 2], np.float32)
    sparse = Tensor(
        0,
        "w",
        (2, 2),
        (2, 2),
        np.dtype(np.float32),
        "FLOAT32",
        None,
        Sparsity((0, 1), (), meta),
        values.view(np.uint8),
    )
    out = Tensor(1, "y", (1,), (1,), np.dtype(np.float32), "FLOAT32", None, None, None)
    node = Node(0, "DENSIFY", 1, (0,), (1,))
    sg = Subgraph(0, "main", (sparse, out), (node,), (), (1,))
    ctx = ShapeContext(node, [sparse.shape], lambda position: None)
    assert Densify.output_shapes(ctx) == [(2, 2)]
    assert Densify(node, sg).run(None).shape == (2, 2)


def test_densify_refuses_a_sparsity_that_addresses_too_much() -> None:
    """A crafted dense_size or segment range cannot make the walk allocate past the tensor."""

    def sparse(meta: tuple[DimensionMetadata, ...]) -> Tensor:
        data = np.array([1, 2], np.float32).view(np.uint8)
        sparsity = Sparsity((0, 1), (), meta)
        return Tensor(0, "w", (2, 2), (2, 2), np.dtype(np.float32), "FLOAT32", None, sparsity, data)

    huge = (DimensionMetadata("DENSE", 2**40, None, None),) * 2
    with pytest.raises(ValueError, match="at most its 4 dense elements"):
        densify(sparse(huge))
    segments = np.array([0, 2**40, 2**40])
    wide = (
        DimensionMetadata("DENSE", 2, None, None),
        DimensionMetadata("SPARSE_CSR", 0, segments, np.array([0, 1])),
    )
    with pytest.raises(ValueError, match="at most its 4 dense elements"):
        densify(sparse(wide))

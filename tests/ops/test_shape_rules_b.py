"""Shape rules (``output_shapes``) of PACK..ZEROS_LIKE give the shapes their kernels produce.

Each case builds a one-op model, runs the CPU kernel on it, and compares the rule's answer
(from the input shapes, options and constants alone) with the shapes of the real outputs.
Invalid inputs must make the rule raise ValueError, and where the kernel shares the rule's
helper, make the kernel refuse them too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pytest

from offload import Interpreter, load_model
from offload.model.builder import ModelBuilder
from offload.ops import kernel_class
from offload.ops._base import ShapeContext

RNG = np.random.default_rng(5)
F32 = np.float32


class In(NamedTuple):
    """One operator input: a runtime input unless ``const``; ``value`` None means omitted."""

    value: Any
    const: bool = False


def c(value: Any, dtype: Any = np.int32) -> In:
    return In(np.asarray(value, dtype), const=True)


def x(*shape: int, dtype: Any = F32) -> In:
    if np.dtype(dtype) == np.bool_:
        return In(RNG.random(shape) > 0.5)
    return In(RNG.standard_normal(shape).astype(dtype))


def build(op: str, ins: Sequence[In], outs: Sequence[Any], options: dict | None = None) -> bytes:
    """A one-op model; ``outs`` holds an output dtype, or (dtype, (scale, zero_point)), per
    output. Outputs are declared (1,): the kernels and the rules never read that."""
    b = ModelBuilder()
    indices = []
    for k, spec in enumerate(ins):
        if spec.value is None:
            indices.append(-1)
        elif spec.const:
            indices.append(b.add_constant(f"c{k}", spec.value))
        else:
            value = np.asarray(spec.value)
            indices.append(b.add_input(f"x{k}", value.shape, value.dtype))
    ys = []
    for k, out in enumerate(outs):
        dtype, q = out if isinstance(out, tuple) else (out, None)
        ys.append(b.add_tensor(f"y{k}", (1,), dtype, quantization=q))
    b.add_operator(op, indices, ys, options or {})
    for y in ys:
        b.add_output(y)
    return b.build()


def rule_and_run(content: bytes, feeds: Sequence[Any] = ()) -> tuple[list, list[tuple]]:
    """(the rule's output shapes, the shapes the kernel produced) for node 0 of ``content``.

    Runtime inputs take ``feeds`` by input position (None where constant or omitted) or,
    when none is given, zeros of the declared shape (variable state tensors)."""
    sg = load_model(model_content=content).main
    node = sg.nodes[0]
    args: list[np.ndarray | None] = []
    for pos, t in enumerate(node.inputs):
        tensor = sg.tensors[t] if t >= 0 else None
        if tensor is None:
            args.append(None)
        elif tensor.is_constant:
            args.append(tensor.constant_value())
        elif pos < len(feeds) and feeds[pos] is not None:
            args.append(np.asarray(feeds[pos]))
        else:
            args.append(np.zeros(tensor.shape, tensor.dtype))

    def constant(position: int) -> np.ndarray | None:
        t = node.inputs[position]
        return sg.tensors[t].constant_value() if sg.tensors[t].is_constant else None

    shapes = [None if a is None else tuple(a.shape) for a in args]
    cls = kernel_class(node)
    rule = cls.output_shapes(ShapeContext(node, shapes, constant))
    assert rule is not None, f"{node.op} has no shape rule"
    result = cls(node, sg).run(*args)
    outputs = [result] if isinstance(result, np.ndarray) else list(result)
    return list(rule), [tuple(o.shape) for o in outputs]


def feeds_of(ins: Sequence[In]) -> list[Any]:
    return [None if i.const else i.value for i in ins]


def check(
    op: str,
    ins: Sequence[In],
    outs: Sequence[Any] | None = None,
    options: dict | None = None,
    dynamic: bool = False,
) -> list[tuple]:
    """The rule gives exactly the kernel's output shapes; with ``dynamic`` it answers None
    for every output instead (its shape depends on a runtime value). Returns the shapes."""
    outs = outs or [np.asarray(ins[0].value).dtype]
    rule, got = rule_and_run(build(op, ins, outs, options), feeds_of(ins))
    assert len(rule) == len(got), (rule, got)
    if dynamic:
        assert rule == [None] * len(got), f"expected no static shapes, found {rule}"
    else:
        assert rule == got, f"rule {rule} != kernel {got}"
        assert all(isinstance(d, int) for s in rule for d in s), f"not Python ints: {rule}"
    return got


def invalid(
    op: str,
    ins: Sequence[In],
    match: str,
    outs: Sequence[Any] | None = None,
    options: dict | None = None,
    kernel: bool = True,
) -> None:
    """The rule refuses these inputs with a ValueError matching ``match``; with ``kernel``
    the kernel, sharing the rule's helper, refuses them too."""
    outs = outs or [np.asarray(ins[0].value).dtype]
    content = build(op, ins, outs, options)
    sg = load_model(model_content=content).main
    node = sg.nodes[0]

    def constant(position: int) -> np.ndarray | None:
        t = node.inputs[position]
        return sg.tensors[t].constant_value() if sg.tensors[t].is_constant else None

    shapes = [None if i.value is None else np.asarray(i.value).shape for i in ins]
    with pytest.raises(ValueError, match=match):
        kernel_class(node).output_shapes(ShapeContext(node, shapes, constant))
    if kernel:
        with pytest.raises(ValueError):
            rule_and_run(content, feeds_of(ins))


# --- stacking and splitting -----------------------------------------------------------


@pytest.mark.parametrize("shape, axis", [((2, 3), 0), ((2, 3), -1), ((2, 3), 1), ((), -1)])
def test_pack(shape, axis) -> None:
    """PACK inserts a dimension of values_count at the (possibly negative) axis."""
    ins = [x(*shape) for _ in range(3)]
    check("PACK", ins, options={"axis": axis, "values_count": 3})


def test_pack_invalid() -> None:
    """PACK needs inputs of one shape, as many as values_count, and an axis within rank+1."""
    opts = {"axis": 0, "values_count": 2}
    invalid("PACK", [x(2, 3), x(3, 2)], r"every input of shape \[2, 3\]", options=opts)
    invalid("PACK", [x(2), x(2)], "values_count=3", options={"values_count": 3}, kernel=False)
    invalid("PACK", [x(2), x(2)], r"axis in \[-2, 2\)", options={"axis": 2, "values_count": 2})


@pytest.mark.parametrize("axis", [1, -1, 0])
def test_unpack(axis) -> None:
    """UNPACK drops the axis; one output per entry along it."""
    shape = (3, 3, 3)
    check("UNPACK", [x(*shape)], [F32] * 3, options={"axis": axis, "num": 3})


def test_unpack_invalid() -> None:
    """UNPACK's num must match the outputs and the axis's dimension."""
    invalid("UNPACK", [x(2, 4)], "dimension 1 of size 3", [F32] * 3, {"axis": 1, "num": 3})
    invalid("UNPACK", [x(2, 3)], "num=2 outputs", [F32] * 3, {"axis": 1, "num": 2}, kernel=False)


def test_split() -> None:
    """SPLIT cuts a constant (negative) axis evenly; a runtime axis leaves shapes unknown."""
    check("SPLIT", [c(-1), x(2, 6)], [F32] * 3, {"num_splits": 3})
    check("SPLIT", [c(0), x(4, 1)], [F32] * 2, {"num_splits": 2})
    check("SPLIT", [In(np.array(1, np.int32)), x(2, 6)], [F32] * 2, {"num_splits": 2}, True)


def test_split_invalid() -> None:
    """SPLIT's dimension must divide by the outputs, which must number num_splits."""
    invalid("SPLIT", [c(1), x(2, 5)], "divide evenly into 2", [F32] * 2, {"num_splits": 2})
    invalid("SPLIT", [c(1), x(2, 6)], "num_splits=3 outputs", [F32] * 2, {"num_splits": 3}, False)
    invalid("SPLIT", [c(2), x(2, 6)], r"axis in \[-2, 2\)", [F32] * 2, {"num_splits": 2})


def test_split_v() -> None:
    """SPLIT_V resolves one -1; any runtime size or axis leaves the shapes unknown."""
    check("SPLIT_V", [x(2, 6, 3), c([1, -1, 2]), c(-2)], [F32] * 3, {"num_splits": 3})
    check("SPLIT_V", [x(5), c([0, 5]), c(0)], [F32] * 2, {"num_splits": 2})
    runtime = [x(2, 6), In(np.array([2, 4], np.int32)), c(1)]
    check("SPLIT_V", runtime, [F32] * 2, {"num_splits": 2}, dynamic=True)


def test_split_v_invalid() -> None:
    """SPLIT_V's sizes must add up to the dimension, with at most one -1."""
    opts = {"num_splits": 2}
    invalid("SPLIT_V", [x(2, 6), c([2, 3]), c(1)], r"adding up to dimension 1", [F32] * 2, opts)
    invalid("SPLIT_V", [x(2, 6), c([-1, -1]), c(1)], "at most one -1", [F32] * 2, opts)
    invalid("SPLIT_V", [x(2, 6), c([7, -1]), c(1)], r"non-negative size_splits", [F32] * 2, opts)
    invalid("SPLIT_V", [x(2, 6), c([[3, 3]]), c(1)], "vector of size_splits", [F32] * 2, opts)


# --- reshaping --------------------------------------------------------------------------


def test_reshape_from_options_and_constant_tensor() -> None:
    """RESHAPE takes new_shape (one -1, [0] for a scalar) or a constant int32 shape tensor."""
    check("RESHAPE", [x(2, 3, 4)], options={"new_shape": [4, -1]})
    check("RESHAPE", [x(1, 1)], options={"new_shape": [0]})
    check("RESHAPE", [x(1, 1)])
    check("RESHAPE", [x(2, 6), c([3, -1, 2])], options={"new_shape": [12]})
    # An empty shape tensor has no buffer, so the model holds it as a runtime input, but
    # its value is known all the same: a reshape to a scalar.
    check("RESHAPE", [x(1, 1), In(np.zeros(0, np.int32))])
    check("RESHAPE", [x(0, 3), c([-1, 3])])
    check("RESHAPE", [x(0, 3), c([2, -1, 0])])


def test_reshape_runtime_shape_tensor() -> None:
    """A runtime shape vector gives no static shape; a non-vector one loses to the options."""
    check("RESHAPE", [x(2, 6), In(np.array([3, 4], np.int32))], dynamic=True)
    opts = {"new_shape": [4, 3]}
    check("RESHAPE", [x(2, 6), In(np.array([3, 4], np.int32))], options=opts, dynamic=True)
    check("RESHAPE", [x(2, 6), In(np.array([[3, 4]], np.int32))], options=opts)


def test_reshape_int64_tensor_loses_to_options() -> None:
    """A constant int64 shape tensor gives way to the options, as in TFLite."""
    check("RESHAPE", [x(2, 6), c([3, 4], np.int64)], options={"new_shape": [12]})
    check("RESHAPE", [x(2, 6), c([3, 4], np.int64)])


def test_reshape_invalid() -> None:
    """RESHAPE must keep the element count and infer at most one dimension."""
    invalid("RESHAPE", [x(2, 6), c([5, 2])], r"cannot reshape \(2, 6\)")
    invalid("RESHAPE", [x(2, 6)], "at most one -1", options={"new_shape": [-1, -1]})
    invalid("RESHAPE", [x(2, 6), c([-2, 6])], "non-negative dimensions")


@pytest.mark.parametrize("dims", [[], [0], [-1], [2, 0]])
def test_squeeze(dims) -> None:
    """SQUEEZE drops the named size-1 dims (negative ones too), or all of them."""
    check("SQUEEZE", [x(1, 3, 1)], options={"squeeze_dims": dims} if dims else None)


def test_squeeze_invalid() -> None:
    """SQUEEZE refuses a dimension that is not 1, or not there."""
    invalid("SQUEEZE", [x(1, 3, 1)], "dimension 1 of", options={"squeeze_dims": [1]})
    invalid("SQUEEZE", [x(1, 3)], r"squeeze dim in \[-2, 2\)", options={"squeeze_dims": [2]})


@pytest.mark.parametrize("perm", [[2, 0, 1], [-1, 0, -2], [0, 1, 2]])
def test_transpose(perm) -> None:
    """TRANSPOSE permutes by a constant perm, negative entries counting from the end."""
    check("TRANSPOSE", [x(2, 3, 4), c(perm)])


def test_transpose_runtime_and_invalid() -> None:
    """A runtime perm leaves the shape unknown; a perm must name every axis once."""
    check("TRANSPOSE", [x(2, 3), In(np.array([1, 0], np.int32))], dynamic=True)
    invalid("TRANSPOSE", [x(2, 3), c([0, 0])], r"permutation of the 2 axes, found \[0, 0\]")
    invalid("TRANSPOSE", [x(2, 3, 4), c([1, 0])], "permutation of the 3 axes")
    invalid("TRANSPOSE", [x(2, 3), c([0, 2])], "perm entry")


# --- slicing ----------------------------------------------------------------------------


def test_slice() -> None:
    """SLICE takes size (or -1: to the end) from begin."""
    check("SLICE", [x(3, 5), c([1, 2]), c([-1, 2])])
    check("SLICE", [x(2, 3, 4), c([0, 1, 1]), c([-1, 2, 0])])


def test_slice_runtime_begin() -> None:
    """With a runtime begin the sizes are still the shape, unless one is -1."""
    check("SLICE", [x(3, 5), In(np.array([1, 1], np.int32)), c([2, 3])])
    check("SLICE", [x(3, 5), In(np.array([1, 1], np.int32)), c([2, -1])], dynamic=True)
    check("SLICE", [x(3, 5), c([1, 1]), In(np.array([2, 3], np.int32))], dynamic=True)


def test_slice_invalid() -> None:
    """SLICE refuses a slice past the end, a negative begin, and begin/size of another rank."""
    invalid("SLICE", [x(3, 5), c([1, 3]), c([1, 3])], r"begin \+ size <= 5, found begin 3")
    invalid("SLICE", [x(3, 5), c([-1, 0]), c([1, 1])], "begin >= 0")
    invalid("SLICE", [x(3, 5), c([0]), c([1])], "begin and size of 2 entries")
    invalid("SLICE", [x(3, 5), c([0, 0]), c([1, -2])], "found begin 0 and size -2")
    invalid("SLICE", [x(3, 5), In(np.array([0, 0], np.int32)), c([4, 1])], "begin \\+ size <= 3")


STRIDED_CASES = [
    # (shape, begin, end, strides, options)
    ((5, 6), [1, -1], [4, 0], [1, -2], {}),
    ((5, 6), [1, 2], [4, 5], [2, 1], {"begin_mask": 1, "end_mask": 2}),
    ((5, 6), [-1, 0], [0, 6], [-1, 1], {"end_mask": 1}),
    ((5, 6), [2, 0], [3, 6], [1, 1], {"shrink_axis_mask": 1}),
    ((5, 6), [-2, -1], [0, 0], [1, 1], {"shrink_axis_mask": 3}),
    ((2, 3, 4), [0, 1], [0, 3], [1, 2], {"ellipsis_mask": 1}),
    ((2, 3, 4), [1, 0, 0], [2, 0, 0], [1, 1, 1], {"new_axis_mask": 2, "end_mask": 4}),
    ((2, 3, 4), [0, 0, 1], [0, 0, 3], [1, 1, 1], {"ellipsis_mask": 1, "new_axis_mask": 2}),
    ((5, 6), [1, 2], [3, 2], [1, 1], {"offset": True}),
    ((5, 6), [10, -10], [20, 10], [1, 1], {}),
    ((4,), [3], [-10], [-1], {}),
    ((4,), [-10], [3], [-1], {}),
    ((4, 3), [1], [3], [1], {}),
    ((4, 3), [0, 0], [4, 3], [3, -1], {"begin_mask": 2, "end_mask": 2}),
    ((3,), [1], [2], [1], {"shrink_axis_mask": 1}),
    ((4,), [0, 0], [1, 1], [1, 1], {}),  # LiteRT ignores spec entries past the rank too
]


@pytest.mark.parametrize("shape, begin, end, strides, options", STRIDED_CASES)
def test_strided_slice(shape, begin, end, strides, options) -> None:
    """STRIDED_SLICE's masks, clamping and offset give the kernel's output shape."""
    check("STRIDED_SLICE", [x(*shape), c(begin), c(end), c(strides)], options=options)


def test_strided_slice_runtime_and_invalid() -> None:
    """Runtime begin/end leave the shape unknown; zero strides, shrinking out of range and
    spec vectors of different lengths are refused."""
    runtime = [x(4, 6), In(np.array([1, 1], np.int32)), c([3, 6]), c([1, 2])]
    check("STRIDED_SLICE", runtime, dynamic=True)
    invalid("STRIDED_SLICE", [x(4, 6), c([0, 0]), c([4, 6]), c([1, 0])], "non-zero strides")
    shrink = {"shrink_axis_mask": 1}
    invalid("STRIDED_SLICE", [x(4), c([5]), c([6]), c([1])], "cannot shrink axis 0", None, shrink)
    invalid("STRIDED_SLICE", [x(4, 6), c([0, 1]), c([3]), c([1, 1])], "one length")


@pytest.mark.parametrize("k", [0, 2, 5, -3])
def test_topk(k) -> None:
    """TOPK_V2 keeps k of the last axis (a negative k keeps none), for values and indices."""
    check("TOPK_V2", [x(2, 3, 5), c(k)], [F32, np.int32])


def test_topk_runtime_and_invalid() -> None:
    """A runtime k leaves both shapes unknown; k must fit the last axis of a non-scalar."""
    check("TOPK_V2", [x(2, 5), In(np.array(3, np.int32))], [F32, np.int32], dynamic=True)
    invalid("TOPK_V2", [x(2, 5), c(6)], r"k <= 5", [F32, np.int32])
    invalid("TOPK_V2", [x(), c(1)], "rank >= 1", [F32, np.int32])
    invalid("TOPK_V2", [x(), In(np.array(1, np.int32))], "rank >= 1", [F32, np.int32], None, False)
    invalid("TOPK_V2", [x(2, 5), c([1, 2])], "single k", [F32, np.int32])


def test_where() -> None:
    """WHERE's row count is known only for a constant condition."""
    cond = RNG.random((3, 4)) > 0.5
    check("WHERE", [In(cond, const=True)], [np.int64])
    check("WHERE", [In(np.zeros((2, 2), bool), const=True)], [np.int64])
    check("WHERE", [In(cond)], [np.int64], dynamic=True)
    invalid("WHERE", [In(np.array(True))], "rank >= 1", [np.int64])


# --- padding, tiling, space and depth ---------------------------------------------------


@pytest.mark.parametrize("op", ["PAD", "PADV2"])
def test_pad(op) -> None:
    """PAD and PADV2 grow each dimension by its constant paddings; runtime ones are unknown."""
    check(op, [x(2, 3), c([[1, 0], [0, 2]])])
    check(op, [x(2, 3), In(np.array([[1, 0], [0, 2]], np.int32))], dynamic=True)
    invalid(op, [x(2, 3), c([[1, 0], [-1, 2]])], "non-negative paddings")
    invalid(op, [x(2, 3), c([[1, 0]])], r"paddings of shape \(2, 2\)")


def test_padv2_constant_value() -> None:
    """PADV2's pad value is optional, and a single value when given."""
    check("PADV2", [x(2, 3), c([[1, 1], [0, 2]]), c(-3.5, F32)])
    check("PADV2", [x(2, 3), c([[1, 1], [0, 2]]), In(None)])
    invalid("PADV2", [x(2, 3), c([[1, 1], [0, 2]]), c([1, 2], F32)], "single pad", kernel=False)


def test_tile() -> None:
    """TILE multiplies each dimension (0 empties it); runtime multiples are unknown."""
    check("TILE", [x(2, 3), c([2, 0])])
    check("TILE", [x(2, 1, 3), c([1, 4, 2], np.int64)])
    check("TILE", [x(2, 3), In(np.array([2, 1], np.int32))], dynamic=True)
    invalid("TILE", [x(2, 3), c([1, -1])], r"2 non-negative multiples, found \[1, -1\]")
    invalid("TILE", [x(2, 3), c([2])], "2 non-negative multiples")


def test_space_to_batch_nd() -> None:
    """SPACE_TO_BATCH_ND pads, then moves blocks into the batch (3-D and 4-D inputs)."""
    check("SPACE_TO_BATCH_ND", [x(2, 3, 5, 2), c([2, 3]), c([[1, 0], [0, 1]])])
    check("SPACE_TO_BATCH_ND", [x(1, 4, 3), c([2]), c([[0, 0]])])
    check("SPACE_TO_BATCH_ND", [x(1, 4, 3), c([2]), In(np.zeros((1, 2), np.int32))], dynamic=True)


def test_space_to_batch_nd_invalid() -> None:
    """Blocks must be positive and divide the padded sizes; paddings are non-negative."""
    s2b = "SPACE_TO_BATCH_ND"
    invalid(s2b, [x(1, 4, 4, 1), c([3, 2]), c([[0, 0], [0, 0]])], "multiples of")
    invalid(s2b, [x(1, 4, 4, 1), c([2, 0]), c([[0, 0], [0, 0]])], "positive block shape")
    invalid(s2b, [x(1, 4, 4, 1), c([2, 2]), c([[0, 0], [-2, 0]])], "non-negative paddings")
    invalid(s2b, [x(4, 4), c([2, 2]), c([[0, 0], [0, 0]])], "at most 1 block dimensions")


def test_space_to_depth() -> None:
    """SPACE_TO_DEPTH divides height and width by the block and multiplies channels."""
    check("SPACE_TO_DEPTH", [x(1, 4, 6, 3)], options={"block_size": 2})
    invalid("SPACE_TO_DEPTH", [x(1, 4, 4, 1)], "multiples of block_size 3", None, {"block_size": 3})
    invalid("SPACE_TO_DEPTH", [x(4, 4, 1)], "4-D NHWC", None, {"block_size": 2})
    invalid("SPACE_TO_DEPTH", [x(1, 4, 4, 1)], "positive block_size", None, {"block_size": 0})


@pytest.mark.parametrize("op", ["RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"])
def test_resize(op) -> None:
    """RESIZE_* take height and width from a constant size; a runtime size is unknown."""
    check(op, [x(2, 3, 4, 5), c([7, 2])])
    check(op, [x(2, 3, 4, 5), In(np.array([7, 2], np.int32))], dynamic=True)
    invalid(op, [x(1, 2, 2, 1), c([0, 3])], "two positive ints")
    invalid(op, [x(1, 2, 2, 1), c([3])], "two positive ints")
    invalid(op, [x(2, 2, 1), c([3, 3])], "4-D NHWC")
    invalid(op, [x(2, 2, 1), In(np.array([3, 3], np.int32))], "4-D NHWC", kernel=False)


# --- ranges and descriptions -------------------------------------------------------------


@pytest.mark.parametrize(
    "start, limit, delta, dtype",
    [
        (0, 10, 3, np.int32),
        (10, -3, -4, np.int32),
        (5, 5, 1, np.int32),
        (0.1, 7.3, 0.7, F32),
        (1.0, 0.0, -0.3, F32),
        (0, 2**40, 2**38, np.int64),
    ],
)
def test_range(start, limit, delta, dtype) -> None:
    """RANGE's length from constant bounds, in the bounds' type."""
    check("RANGE", [c(start, dtype), c(limit, dtype), c(delta, dtype)])


def test_range_runtime_and_invalid() -> None:
    """Runtime bounds leave the length unknown; an unreachable limit, a zero delta, a
    non-finite length and non-scalar bounds are refused."""
    check("RANGE", [In(np.array(0, np.int32)), c(5), c(1)], dynamic=True)
    invalid("RANGE", [c(0), c(5), c(0)], "reaches limit 5")
    invalid("RANGE", [c(0), c(5), c(-1)], "reaches limit 5")
    invalid("RANGE", [c(0, F32), c(np.inf, F32), c(1, F32)], "finite number of values")
    invalid("RANGE", [c(0, F32), c(np.nan, F32), c(1, F32)], "finite number of values")
    invalid("RANGE", [c(-3e38, F32), c(3e38, F32), c(1, F32)], "finite number of values")
    invalid("RANGE", [c([0]), c(5), c(1)], r"scalar start, found shape \[1\]", kernel=False)


def test_shape_rank_and_like() -> None:
    """SHAPE is a vector of the rank, RANK a scalar; ZEROS_LIKE and QUANTIZE keep the shape."""
    for shape in [(2, 3, 4), ()]:
        check("SHAPE", [x(*shape)], [np.int32])
        check("RANK", [x(*shape)], [np.int32])
        check("ZEROS_LIKE", [x(*shape)])
        check("QUANTIZE", [x(*shape)], [(np.int8, (0.1, 3))])


def test_softmax() -> None:
    """SOFTMAX keeps the shape and needs an axis to run along."""
    check("SOFTMAX", [x(2, 5)], options={"beta": 1.0})
    invalid("SOFTMAX", [x()], "rank >= 1", options={"beta": 1.0}, kernel=False)


def test_reverse_v2() -> None:
    """REVERSE_V2 keeps the shape; its constant axes must be distinct and contiguous."""
    for axes in [[1], [-1, -2], []]:
        check("REVERSE_V2", [x(2, 3, 4), c(axes)])
    check("REVERSE_V2", [x(2, 3, 4), In(np.array([1], np.int32))])
    invalid("REVERSE_V2", [x(2, 3, 4), c([0, 2])], r"contiguous axes .*found \[0, 2\]")
    invalid("REVERSE_V2", [x(2, 3, 4), c([1, 1])], "distinct contiguous")
    invalid("REVERSE_V2", [x(2, 3, 4), c([3])], r"axis in \[-3, 3\)")


def test_rfft2d() -> None:
    """RFFT2D crops or pads the two inner axes to fft_length, keeping width // 2 + 1."""
    check("RFFT2D", [x(3, 8, 8), c([4, 2])], [np.complex64])
    check("RFFT2D", [x(5, 6), c([16, 16])], [np.complex64])
    check("RFFT2D", [x(5, 6), In(np.array([4, 4], np.int32))], [np.complex64], dynamic=True)
    invalid("RFFT2D", [x(4, 4), c([3, 4])], r"two powers of two, found \[3, 4\]", [np.complex64])
    invalid("RFFT2D", [x(4, 4), c([4, 4, 4])], "two powers of two", [np.complex64])
    invalid("RFFT2D", [x(4), c([4, 4])], "rank >= 2", [np.complex64])


# --- selection ------------------------------------------------------------------------


@pytest.mark.parametrize("cond_shape", [(2, 3), (), (2,)])
def test_select(cond_shape) -> None:
    """SELECT's condition has x's shape, is a scalar, or picks rows."""
    check("SELECT", [x(*cond_shape, dtype=bool), x(2, 3), x(2, 3)])


def test_select_invalid() -> None:
    """SELECT needs x and y of one shape and no numpy-style broadcasting of the condition."""
    invalid("SELECT", [x(2, 3, dtype=bool), x(2, 3), x(3, 2)], "x and y of one shape", kernel=False)
    invalid("SELECT", [x(1, dtype=bool), x(3), x(3)], r"or of shape \[3\]", kernel=False)
    invalid("SELECT", [x(2, dtype=bool), x(), x()], r"or a scalar, found \[2\]", kernel=False)


def test_select_v2() -> None:
    """SELECT_V2 broadcasts condition, x and y together."""
    check("SELECT_V2", [x(2, 1, 3, dtype=bool), x(4, 1), x()])
    check("SELECT_V2", [x(dtype=bool), x(2, 3), x(2, 3)])
    invalid("SELECT_V2", [x(2, dtype=bool), x(3), x(3)], r"broadcast together, found \[2\]")


# --- convolution and recurrent ------------------------------------------------------------


def transpose_conv(out_shape: In, x_shape=(1, 3, 4, 2), filt=(5, 3, 3, 2), bias=True, **opts):
    ins = [out_shape, In(RNG.standard_normal(filt).astype(F32), const=True), x(*x_shape)]
    if bias:
        ins.append(In(np.zeros(filt[0], F32), const=True))
    options = {"padding": "SAME", "stride_h": 2, "stride_w": 2, **opts}
    return ins, options


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_transpose_conv(padding) -> None:
    """TRANSPOSE_CONV's output shape is its constant first input; a runtime one is unknown."""
    ins, opts = transpose_conv(c([1, 6, 8, 5]), padding=padding)
    check("TRANSPOSE_CONV", ins, [F32], opts)
    ins, opts = transpose_conv(c([1, 7, 9, 5]), bias=False, padding=padding)
    check("TRANSPOSE_CONV", ins, [F32], opts)
    ins, opts = transpose_conv(In(np.array([1, 6, 8, 5], np.int32)))
    check("TRANSPOSE_CONV", ins, [F32], opts, dynamic=True)


def test_transpose_conv_huge_stride_stays_small() -> None:
    """A huge stride does not size the kernel's scatter buffer (a memory bomb otherwise)."""
    ins, opts = transpose_conv(c([1, 3, 3, 5]), stride_h=2**30, stride_w=2**30)
    check("TRANSPOSE_CONV", ins, [F32], opts)


def test_transpose_conv_invalid() -> None:
    """The output shape's batch and channels, the filter's input channels, the bias length
    and the strides must agree with the operands."""
    tc = "TRANSPOSE_CONV"
    ins, opts = transpose_conv(c([2, 6, 8, 5]))
    invalid(tc, ins, r"output_shape \[1, height, width, 5\], found \[2, 6, 8, 5\]", [F32], opts)
    ins, opts = transpose_conv(c([1, 6, 8, 4]))
    invalid(tc, ins, r"found \[1, 6, 8, 4\]", [F32], opts)
    ins, opts = transpose_conv(c([1, 6, 8, 5]), filt=(5, 3, 3, 3))
    invalid(tc, ins, "filter of 2 input channels", [F32], opts, kernel=False)
    ins, opts = transpose_conv(c([1, 6, 8, 5]), stride_h=0)
    invalid(tc, ins, "positive strides", [F32], opts, kernel=False)
    ins, opts = transpose_conv(c([1, 6, 8, 5]))
    ins[3] = In(np.zeros(4, F32), const=True)
    invalid(tc, ins, "bias of 5 values", [F32], opts, kernel=False)


def rnn_model(op: str, shape, units=4, time_major=False, state=None) -> bytes:
    b = ModelBuilder()
    xi = b.add_input("x", shape)
    n_input = shape[-1]
    batch = shape[0] if op == "RNN" or not time_major else shape[1]
    w = b.add_constant("w", RNG.standard_normal((units, n_input)).astype(F32))
    r = b.add_constant("r", RNG.standard_normal((units, units)).astype(F32))
    bias = b.add_constant("b", np.zeros(units, F32))
    h = b.add_tensor("h", state or (batch, units), is_variable=True)
    y = b.add_tensor("y", (1,))
    options: dict[str, Any] = {"fused_activation_function": "TANH"}
    if op != "RNN":
        options["time_major"] = time_major
    b.add_operator(op, [xi, w, r, bias, h], [y], options)
    b.add_output(y)
    return b.build()


@pytest.mark.parametrize(
    "op, shape, time_major",
    [
        ("RNN", (2, 5), False),
        ("UNIDIRECTIONAL_SEQUENCE_RNN", (2, 3, 5), False),
        ("UNIDIRECTIONAL_SEQUENCE_RNN", (3, 2, 5), True),
    ],
)
def test_rnn(op, shape, time_major) -> None:
    """RNN gives [batch, units]; the sequence RNN keeps its layout with units last."""
    content = rnn_model(op, shape, time_major=time_major)
    rule, got = rule_and_run(content, [RNG.standard_normal(shape).astype(F32)])
    assert rule == got


@pytest.mark.parametrize("op, shape", [("RNN", (2, 5)), ("UNIDIRECTIONAL_SEQUENCE_RNN", (2, 3, 5))])
def test_rnn_invalid(op, shape) -> None:
    """The hidden state must be [batch, units]."""
    content = rnn_model(op, shape, state=(3, 4))
    sg = load_model(model_content=content).main
    node = sg.nodes[0]
    shapes = [sg.tensors[t].shape for t in node.inputs]
    ctx = ShapeContext(node, shapes, lambda i: None)
    with pytest.raises(ValueError, match=r"hidden state of shape \[2, 4\], found \[3, 4\]"):
        kernel_class(node).output_shapes(ctx)


def lstm_model(shape, time_major=True, n_cell=4, n_output=3, states=None) -> bytes:
    """A float UNIDIRECTIONAL_SEQUENCE_LSTM with a projection (n_output != n_cell)."""
    b = ModelBuilder()
    xi = b.add_input("x", shape)
    n_batch = 1 if len(shape) == 2 else shape[1] if time_major else shape[0]

    def const(name: str, *dims: int) -> int:
        return b.add_constant(name, RNG.standard_normal(dims).astype(F32) * 0.3)

    ins = [xi]
    ins += [const(f"w{g}", n_cell, shape[-1]) for g in "ifco"]
    ins += [const(f"r{g}", n_cell, n_output) for g in "ifco"]
    ins += [-1, -1, -1]
    ins += [const(f"b{g}", n_cell) for g in "ifco"]
    ins += [const("proj", n_output, n_cell), -1]
    h_shape, c_shape = states or ((n_batch, n_output), (n_batch, n_cell))
    ins += [
        b.add_tensor("h", h_shape, is_variable=True),
        b.add_tensor("c", c_shape, is_variable=True),
    ]
    y = b.add_tensor("y", (1,))
    options = {"fused_activation_function": "TANH", "time_major": time_major}
    b.add_operator("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [y], options)
    b.add_output(y)
    return b.build()


@pytest.mark.parametrize(
    "shape, time_major", [((3, 2, 5), True), ((2, 3, 5), False), ((3, 5), True), ((3, 5), False)]
)
def test_unidirectional_sequence_lstm(shape, time_major) -> None:
    """The sequence LSTM keeps the input's layout with n_output (the projection's) last."""
    content = lstm_model(shape, time_major)
    rule, got = rule_and_run(content, [RNG.standard_normal(shape).astype(F32)])
    assert rule == got
    assert got[0][-1] == 3


def test_unidirectional_sequence_lstm_invalid() -> None:
    """The state tensors must hold batch x n_output and batch x n_cell values."""
    content = lstm_model((3, 2, 5), states=((2, 4), (2, 4)))
    sg = load_model(model_content=content).main
    node = sg.nodes[0]
    shapes = [sg.tensors[t].shape if t >= 0 else None for t in node.inputs]
    ctx = ShapeContext(node, shapes, lambda i: None)
    with pytest.raises(ValueError, match=r"output state of 2 x 3 values, found shape \[2, 4\]"):
        kernel_class(node).output_shapes(ctx)


# --- through the interpreter --------------------------------------------------------------


def chain_model() -> bytes:
    """TRANSPOSE -> RESHAPE (-1) -> STRIDED_SLICE -> PAD -> TILE -> SPLIT -> PACK on a
    (2, 3, 4) input, every shape declared as the rules compute it."""
    b = ModelBuilder()
    t = b.add_input("x", (2, 3, 4))
    steps: list[tuple[str, list[Any], dict, list[tuple[int, ...]]]] = [
        ("TRANSPOSE", [[2, 0, 1]], {}, [(4, 2, 3)]),
        ("RESHAPE", [], {"new_shape": [4, -1]}, [(4, 6)]),
        ("STRIDED_SLICE", [[1, 0], [4, 6], [1, 2]], {}, [(3, 3)]),
        ("PAD", [[[1, 0], [0, 2]]], {}, [(4, 5)]),
        ("TILE", [[1, 2]], {}, [(4, 10)]),
    ]
    for k, (op, consts, options, shapes) in enumerate(steps):
        extra = [b.add_constant(f"c{k}_{j}", np.asarray(v, np.int32)) for j, v in enumerate(consts)]
        out = b.add_tensor(f"t{k}", shapes[0])
        b.add_operator(op, [t, *extra], [out], options)
        t = out
    halves = [b.add_tensor(f"half{j}", (4, 5)) for j in range(2)]
    b.add_operator("SPLIT", [b.add_constant("axis", np.int32(1)), t], halves, {"num_splits": 2})
    y = b.add_tensor("y", (2, 4, 5))
    b.add_operator("PACK", halves, [y], {"axis": 0, "values_count": 2})
    b.add_output(y)
    return b.build()


def test_interpreter_sizes_a_chain_from_the_rules() -> None:
    """The interpreter accepts shapes declared as the rules compute them, and after a resized
    input re-derives every shape down the chain to what the kernels produce."""
    interp = Interpreter(model_content=chain_model(), delegates=[])
    interp.allocate_tensors()
    (detail,) = interp.get_input_details()
    out = interp.get_output_details()[0]["index"]
    interp.set_tensor(detail["index"], RNG.standard_normal((2, 3, 4)).astype(F32))
    interp.invoke()
    assert interp.get_tensor(out).shape == (2, 4, 5)
    interp.resize_tensor_input(detail["index"], (2, 3, 2))
    interp.allocate_tensors()
    interp.set_tensor(detail["index"], RNG.standard_normal((2, 3, 2)).astype(F32))
    interp.invoke()
    # (2, 2, 3) -> (4, 3) -> (3, 2) -> (4, 4) -> (4, 8) -> 2 x (4, 4) -> (2, 4, 4)
    assert interp.get_tensor(out).shape == (2, 4, 4)

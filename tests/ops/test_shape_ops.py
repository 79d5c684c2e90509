"""Shape and data-movement kernels agree with LiteRT's builtin kernels on one-op models."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pytest

from offload import load_model
from offload.ops import kernel_class

litert = pytest.importorskip("ai_edge_litert.interpreter")
builder = pytest.importorskip("offload.model", reason="needs offload.model.builder")

pytestmark = pytest.mark.litert
RNG = np.random.default_rng(11)
DTYPES = [np.float32, np.float16, np.int8, np.uint8, np.int16, np.int32, np.int64, np.bool_]


class In(NamedTuple):
    """One operator input: a runtime input unless ``const``; ``q`` is (scale, zero_point)."""

    value: np.ndarray | None
    const: bool = False
    q: tuple[float, int] | None = None


def c(value: Any, dtype: Any = np.int32) -> In:
    return In(np.asarray(value, dtype), const=True)


def data(shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    if np.issubdtype(dtype, np.floating):
        return RNG.standard_normal(shape).astype(dtype)
    if dtype == np.bool_:
        return RNG.random(shape) > 0.5
    info = np.iinfo(dtype)
    return RNG.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True).astype(dtype)


def build(op: str, ins: list[In], outs, options=None, version=1, shapes=None) -> bytes:
    b = builder.ModelBuilder()
    indices = []
    for k, i in enumerate(ins):
        if i.value is None:
            indices.append(-1)
        elif i.const:
            indices.append(b.add_constant(f"c{k}", i.value, quantization=i.q))
        else:
            indices.append(b.add_input(f"x{k}", i.value.shape, i.value.dtype, quantization=i.q))
    shapes = shapes or [(1,)] * len(outs)
    ys = [
        b.add_tensor(f"y{k}", shape, dt, quantization=q)
        for k, ((dt, q), shape) in enumerate(zip(outs, shapes))
    ]
    b.add_operator(op, indices, ys, options or {}, version=version)
    for y in ys:
        b.add_output(y)
    return b.build()


def litert_run(content: bytes, ins: list[In]) -> list[np.ndarray]:
    interp = litert.Interpreter(
        model_content=content,
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    interp.allocate_tensors()
    feeds = [i.value for i in ins if i.value is not None and not i.const]
    for detail, value in zip(interp.get_input_details(), feeds):
        interp.resize_tensor_input(detail["index"], value.shape)
    interp.allocate_tensors()
    for detail, value in zip(interp.get_input_details(), feeds):
        interp.set_tensor(detail["index"], value)
    interp.invoke()
    return [interp.get_tensor(d["index"]) for d in interp.get_output_details()]


def offload_run(content: bytes, ins: list[In]) -> list[np.ndarray]:
    sg = load_model(model_content=content).main
    node = sg.nodes[0]
    args = [None if i.value is None else i.value for i in ins]
    result = kernel_class(node)(node, sg).run(*args)
    return [result] if isinstance(result, np.ndarray) else list(result)


def check(op: str, ins: list[In], outs=None, options=None, version=1, atol=0.0) -> list:
    """Run ``op`` in LiteRT and in offload; outputs must match in shape, dtype and value."""
    first = next(i for i in ins if i.value is not None)
    outs = outs or [(first.value.dtype, first.q)]
    # Some LiteRT kernels check the declared output rank, so declare the shapes offload
    # computes (offload's kernels never read them); LiteRT still resizes or rejects them.
    got = offload_run(build(op, ins, outs, options, version), ins)
    content = build(op, ins, outs, options, version, shapes=[g.shape for g in got])
    want = litert_run(content, ins)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if np.issubdtype(w.dtype, np.floating) and atol:
            np.testing.assert_allclose(g, w, rtol=0, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)
    return got


# --- reshaping ---------------------------------------------------------------------------


def test_reshape_infers_minus_one_from_options() -> None:
    """RESHAPE's options.new_shape may hold one -1, inferred from the element count."""
    check("RESHAPE", [In(data((2, 3, 4)))], options={"new_shape": [4, -1]})


def test_reshape_reads_runtime_shape_tensor() -> None:
    """A runtime int32 shape tensor wins over the options."""
    check("RESHAPE", [In(data((2, 6))), In(np.array([3, -1, 2], np.int32))])


def test_squeeze_expand_dims_shape_rank() -> None:
    """SQUEEZE drops the named size-1 dims, EXPAND_DIMS adds one, SHAPE/RANK describe."""
    x = data((1, 3, 1, 2))
    check("SQUEEZE", [In(x)], options={"squeeze_dims": [-2]})
    check("SQUEEZE", [In(x)])
    check("EXPAND_DIMS", [In(x), c(-1)])
    check("SHAPE", [In(x)], outs=[(np.int64, None)], options={"out_type": 4})
    check("RANK", [In(x)], outs=[(np.int32, None)])


def test_fill_with_runtime_dims() -> None:
    """FILL's dims may be computed at run time."""
    check("FILL", [In(np.array([2, 3], np.int32)), c(1.5, np.float32)], outs=[(np.float32, None)])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_pack_unpack(axis: int) -> None:
    """PACK stacks along a new axis; UNPACK undoes it."""
    xs = [In(data((2, 3))) for _ in range(3)]
    check("PACK", xs, options={"axis": axis, "values_count": 3})
    check(
        "UNPACK",
        [In(data((2, 3, 4)))],
        outs=[(np.float32, None)] * 3,
        options={"axis": 1, "num": 3},
    )


# --- slicing -----------------------------------------------------------------------------


MOVES = {
    # op: (extra inputs after the (2, 3, 4) data tensor, options, number of outputs)
    "TRANSPOSE": ([c([2, 0, 1])], {}, 1),
    "RESHAPE": ([c([4, -1])], {}, 1),
    "SLICE": ([c([0, 1, 1]), c([-1, 2, 2])], {}, 1),
    "STRIDED_SLICE": ([c([0, 2, 0]), c([2, 0, 4]), c([1, -1, 3])], {}, 1),
    "GATHER": ([c([1, 0])], {}, 1),
    "GATHER_ND": ([c([[1, 0]])], {}, 1),
    "TILE": ([c([1, 2, 1])], {}, 1),
    "PAD": ([c([[1, 0], [0, 1], [0, 0]])], {}, 1),
    "MIRROR_PAD": ([c([[1, 0], [0, 1], [0, 0]])], {"mode": "SYMMETRIC"}, 1),
    "REVERSE_V2": ([c([1])], {}, 1),
    "BROADCAST_TO": ([c([2, 2, 3, 4])], {}, 1),
    "UNPACK": ([], {"axis": 1, "num": 3}, 3),
    "CONCATENATION": ("twice", {"axis": 1}, 1),
    "PACK": ("twice", {"axis": 0, "values_count": 2}, 1),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", sorted(MOVES))
def test_data_movement_keeps_every_dtype(op: str, dtype: Any) -> None:
    """Data-movement ops move elements of any dtype unchanged and keep the dtype.

    Where LiteRT has no kernel for a dtype, the same op on the values as float32/int32 is
    the reference.
    """
    extra, options, n_out = MOVES[op]
    x = data((2, 3, 4), dtype)
    version = 2 if op == "BROADCAST_TO" else 1

    def inputs(v: np.ndarray) -> list[In]:
        return [In(v), In(v)] if extra == "twice" else [In(v), *extra]

    try:
        check(op, inputs(x), outs=[(x.dtype, None)] * n_out, options=options, version=version)
        return
    except RuntimeError:
        pass  # LiteRT has no kernel for this dtype
    wide = x.astype(np.float32 if np.issubdtype(dtype, np.floating) else np.int32)
    want = check(
        op, inputs(wide), outs=[(wide.dtype, None)] * n_out, options=options, version=version
    )
    got = offload_run(build(op, inputs(x), [(x.dtype, None)] * n_out, options, version), inputs(x))
    for g, w in zip(got, want):
        assert g.dtype == x.dtype
        np.testing.assert_array_equal(g.astype(w.dtype), w)


def test_slice_with_runtime_begin_and_size() -> None:
    """SLICE reads begin and size at run time; size -1 means to the end."""
    check(
        "SLICE", [In(data((3, 5))), In(np.array([1, 2], np.int32)), In(np.array([-1, 2], np.int32))]
    )


STRIDED_CASES = [
    # (shape, begin, end, strides, options)
    ((5, 6), [1, -1], [4, 0], [1, -2], {}),
    ((5, 6), [1, 2], [4, 5], [2, 1], {"begin_mask": 1, "end_mask": 2}),
    ((5, 6), [-1, 0], [0, 6], [-1, 1], {"end_mask": 1}),
    ((5, 6), [2, 0], [3, 6], [1, 1], {"shrink_axis_mask": 1}),
    ((5, 6), [-2, -1], [0, 0], [1, 1], {"shrink_axis_mask": 3}),
    ((2, 3, 4), [0, 1], [0, 3], [1, 2], {"ellipsis_mask": 1}),
    ((2, 3, 4), [1, 0, 0], [2, 0, 0], [1, 1, 1], {"new_axis_mask": 2, "end_mask": 4}),
    ((5, 6), [1, 2], [3, 2], [1, 1], {"offset": True}),
    ((5, 6), [10, -10], [20, 10], [1, 1], {}),
    ((4,), [3], [-10], [-1], {}),
]


@pytest.mark.parametrize("shape, begin, end, strides, options", STRIDED_CASES)
def test_strided_slice_masks(shape, begin, end, strides, options) -> None:
    """STRIDED_SLICE resolves begin/end/ellipsis/new_axis/shrink masks and offset like TFLite."""
    ins = [In(data(shape)), c(begin), c(end), c(strides)]
    check("STRIDED_SLICE", ins, options=options, version=8 if options.get("offset") else 1)


def test_strided_slice_runtime_indices() -> None:
    """Begin and end computed at run time are honoured."""
    ins = [
        In(data((4, 6))),
        In(np.array([1, 1], np.int32)),
        In(np.array([3, 6], np.int32)),
        c([1, 2]),
    ]
    check("STRIDED_SLICE", ins)


def test_split_and_split_v() -> None:
    """SPLIT cuts evenly along a runtime axis; SPLIT_V by sizes with one -1."""
    x = data((2, 6, 3))
    check("SPLIT", [c(1), In(x)], outs=[(np.float32, None)] * 3, options={"num_splits": 3})
    check(
        "SPLIT_V",
        [In(x), c([1, -1, 2]), c(-2)],
        outs=[(np.float32, None)] * 3,
        options={"num_splits": 3},
    )


@pytest.mark.parametrize("axis, batch_dims", [(0, 0), (1, 0), (-1, 0), (1, 1), (2, 1)])
def test_gather_axis_and_batch_dims(axis: int, batch_dims: int) -> None:
    """GATHER picks along axis with leading batch_dims shared by input and positions."""
    x = data((2, 3, 4))
    pos = RNG.integers(0, x.shape[axis], (2, 3)).astype(np.int32)
    check("GATHER", [In(x), In(pos)], options={"axis": axis, "batch_dims": batch_dims})


def test_gather_nd() -> None:
    """GATHER_ND indexes the leading dims with each index row."""
    check("GATHER_ND", [In(data((3, 4, 2))), c([[0, 1], [2, 3], [1, 0]])])


# --- padding and tiling ------------------------------------------------------------------


def test_pad_quantized_uses_output_zero_point() -> None:
    """PAD fills quantized tensors with the output zero point."""
    x = In(data((1, 2, 2, 3), np.int8), q=(0.1, -7))
    check("PAD", [x, c([[0, 0], [1, 2], [2, 1], [0, 0]])], outs=[(np.int8, (0.1, -7))])
    check("PAD", [In(data((2, 3))), In(np.array([[1, 0], [0, 2]], np.int32))])


def test_padv2_constant_value() -> None:
    """PADV2 fills with its constant value."""
    check("PADV2", [In(data((2, 3))), c([[1, 1], [0, 2]]), c(-3.5, np.float32)])


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
def test_mirror_pad(mode: str) -> None:
    """MIRROR_PAD reflects without (REFLECT) or with (SYMMETRIC) the edge."""
    check(
        "MIRROR_PAD",
        [In(data((1, 4, 5, 2))), c([[0, 0], [2, 3], [1, 2], [0, 0]])],
        options={"mode": mode},
    )


def test_broadcast_to_and_reverse() -> None:
    """BROADCAST_TO expands to a target shape; REVERSE_V2 flips an axis."""
    check("BROADCAST_TO", [In(data((3, 1))), c([2, 3, 4])], version=2)
    check("REVERSE_V2", [In(data((2, 3, 4))), c([1])])


# --- space/depth/batch -------------------------------------------------------------------


def test_depth_space_round_trip() -> None:
    """DEPTH_TO_SPACE and SPACE_TO_DEPTH use TFLite's NHWC block order."""
    check("DEPTH_TO_SPACE", [In(data((1, 2, 3, 8)))], options={"block_size": 2})
    check("SPACE_TO_DEPTH", [In(data((1, 4, 6, 3)))], options={"block_size": 2})


def test_space_batch_nd() -> None:
    """SPACE_TO_BATCH_ND pads with the zero point; BATCH_TO_SPACE_ND crops."""
    x = In(data((2, 3, 5, 2), np.uint8), q=(0.5, 9))
    check("SPACE_TO_BATCH_ND", [x, c([2, 3]), c([[1, 0], [0, 1]])], outs=[(np.uint8, (0.5, 9))])
    check("BATCH_TO_SPACE_ND", [In(data((12, 2, 3, 2))), c([2, 3]), c([[1, 0], [0, 2]])])


# --- concatenation -----------------------------------------------------------------------


def test_concatenation_uint8_requantizes_differing_scales() -> None:
    """uint8 inputs with another scale or zero point are requantized to the output's."""
    ins = [
        In(data((1, 2, 3), np.uint8), q=(0.05, 120)),
        In(data((1, 2, 2), np.uint8), q=(0.02, 3)),
        In(data((1, 2, 1), np.uint8), q=(0.1, 128)),
    ]
    check("CONCATENATION", ins, outs=[(np.uint8, (0.1, 128))], options={"axis": -1})


def test_concatenation_int8_differing_scales() -> None:
    """LiteRT refuses int8 inputs whose scale differs; offload requantizes them like uint8."""
    ins = [In(data((2, 3), np.int8), q=(0.05, -10)), In(data((2, 2), np.int8), q=(0.1, 0))]
    content = build("CONCATENATION", ins, [(np.int8, (0.1, 0))], {"axis": 1})
    with pytest.raises(RuntimeError):
        litert_run(content, ins)
    (got,) = offload_run(content, ins)
    real = np.concatenate(
        [(ins[0].value.astype(np.float32) + 10) * 0.05, ins[1].value.astype(np.float32) * 0.1],
        axis=1,
    )
    assert np.abs(got.astype(np.float32) * 0.1 - real).max() <= 0.05 + 1e-6


def test_concatenation_int8_same_scale_and_float() -> None:
    """Matching int8 quantization and float inputs concatenate by copying."""
    ins = [In(data((2, 3), np.int8), q=(0.1, 2)), In(data((2, 1), np.int8), q=(0.1, 2))]
    check("CONCATENATION", ins, outs=[(np.int8, (0.1, 2))], options={"axis": 1})
    check("CONCATENATION", [In(data((1, 2))), In(data((3, 2)))], options={"axis": 0})


# --- resizing ----------------------------------------------------------------------------

RESIZE_MODES = [(False, False), (True, False), (False, True)]
# (4, 4, 8, 8) and (3, 5, 6, 10) take TFLite's float special case for an exact 2x upscale.
RESIZE_SIZES = [(3, 4, 7, 5), (4, 4, 8, 8), (3, 5, 6, 10), (5, 7, 3, 2), (1, 3, 4, 6)]


@pytest.mark.parametrize("align_corners, half_pixel", RESIZE_MODES)
@pytest.mark.parametrize("in_h, in_w, out_h, out_w", RESIZE_SIZES)
@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int8, np.int16])
def test_resize_bilinear(align_corners, half_pixel, in_h, in_w, out_h, out_w, dtype) -> None:
    """RESIZE_BILINEAR: float32 and uint8 in float, int8/int16 in 10-bit fixed point."""
    q = None if dtype == np.float32 else (0.05, 0)
    x = In(data((2, in_h, in_w, 5), dtype), q=q)
    opts = {"align_corners": align_corners, "half_pixel_centers": half_pixel}
    check("RESIZE_BILINEAR", [x, c([out_h, out_w])], outs=[(dtype, q)], options=opts)


@pytest.mark.parametrize("align_corners, half_pixel", RESIZE_MODES)
@pytest.mark.parametrize("in_h, in_w, out_h, out_w", RESIZE_SIZES)
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.int16])
def test_resize_nearest_neighbor(align_corners, half_pixel, in_h, in_w, out_h, out_w, dtype):
    """RESIZE_NEAREST_NEIGHBOR picks TFLite's source pixel in every mode."""
    x = In(data((1, in_h, in_w, 2), dtype))
    opts = {"align_corners": align_corners, "half_pixel_centers": half_pixel}
    check("RESIZE_NEAREST_NEIGHBOR", [x, In(np.array([out_h, out_w], np.int32))], options=opts)


# --- generators --------------------------------------------------------------------------


def test_range() -> None:
    """RANGE accumulates float32 steps one at a time; integers count exactly."""
    check("RANGE", [c(0.1, np.float32), c(7.3, np.float32), c(0.7, np.float32)])
    check(
        "RANGE",
        [In(np.array(10, np.int32)), In(np.array(-3, np.int32)), In(np.array(-4, np.int32))],
    )


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot(axis: int) -> None:
    """ONE_HOT puts on_value where the index matches; out-of-range indices stay off."""
    ins = [In(np.array([[0, 3], [5, -1]], np.int32)), c(4), c(2.0, np.float32), c(-1.0, np.float32)]
    check("ONE_HOT", ins, outs=[(np.float32, None)], options={"axis": axis})


def test_where_and_topk() -> None:
    """WHERE lists true coordinates; TOPK_V2 breaks ties by the lower index."""
    check("WHERE", [In(data((3, 4), np.bool_))], outs=[(np.int64, None)])
    x = np.array([[1, 3, 3, 2, 3], [0, -1, 5, 5, -2]], np.float32)
    check("TOPK_V2", [In(x), c(3)], outs=[(np.float32, None), (np.int32, None)])
    check("TOPK_V2", [In(data((2, 9), np.int8)), c(4)], outs=[(np.int8, None), (np.int32, None)])

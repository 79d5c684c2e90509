"""The extension API delegate authors build on: plugins use it and nothing private, and its
quantization, geometry and shape-check rules are the ones the CPU reference uses."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import offload
from offload import geometry, quant
from offload.errors import TensorShapeError
from offload.model import builder
from offload.ops import output_shapes

PLUGINS = Path(__file__).resolve().parent.parent / "plugins"


def private_imports(package: Path) -> list[str]:
    """``file:line name`` of every import of an underscore module of offload under ``package``
    (``import offload._x``, ``from offload.ops._x import y``, ``from offload import _x``)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        if "build" in path.relative_to(package).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            private = [n for n in names if n.split(".")[0] == "offload" and "._" in n]
            if private:  # one entry per statement: the module, or the underscore name imported
                found.append(f"{path.relative_to(package)}:{node.lineno} {private[0]}")
    return found


@pytest.mark.parametrize("plugin", ["coreml", "dummy", "gpu_opencl", "litert", "openvino"])
def test_plugin_imports_only_public_offload_modules(plugin: str):
    """No file of a plugin imports a private (underscore) module of offload."""
    assert private_imports(PLUGINS / plugin) == []


def test_private_import_check_sees_every_form(tmp_path: Path):
    """The check catches ``import``, ``from ... import`` and ``from offload import _x``, and
    leaves public modules and other packages alone."""
    (tmp_path / "m.py").write_text(
        "import offload._graph\nfrom offload.ops._conv import x\nfrom offload import _plan\n"
        "from offload.quant import quantize\nimport offload_other._private\n"
        "from offload import errors\n"
    )
    found = [entry.split(" ")[1] for entry in private_imports(tmp_path)]
    assert found == ["offload._graph", "offload.ops._conv", "offload._plan"]


# -- offload.quant ----------------------------------------------------------------------------


def q(scale: float | list[float], zero_point: int | list[int] = 0, axis: int = 0):
    return quant.Quantization(
        np.atleast_1d(np.asarray(scale, np.float32)),
        np.atleast_1d(np.asarray(zero_point, np.int64)),
        axis,
    )


def test_scale_zero_point_reads_the_float32_scale():
    """The scale is the float32 LiteRT stores, as np.float32; no quantization reads (0, 0)."""
    scale, zero_point = quant.scale_zero_point(q(0.1, 3))
    assert type(scale) is np.float32 and scale == np.float32(0.1) and zero_point == 3
    assert quant.scale_zero_point(None) == (0.0, 0)


def test_quantize_rounds_half_away_from_zero_and_clamps():
    """QUANTIZE rounds halves away from zero (not to even) and clamps to the dtype."""
    got = quant.quantize(np.array([0.25, -0.25, 0.75, 100.0]), q(0.5), np.int8)
    np.testing.assert_array_equal(got, [1, -1, 2, 127])


def test_dequantize_per_channel():
    """Per-channel dequantize scales along quantized_dimension."""
    values = np.array([[1, 2], [3, 4]], np.int8)
    got = quant.dequantize(values, q([1.0, 0.5], [0, 1], axis=1))
    np.testing.assert_array_equal(got, [[1.0, 0.5], [3.0, 1.5]])


def test_quantize_multiplier_is_litert_q31():
    """QuantizeMultiplier: real = multiplier * 2**(shift - 31), multiplier in [2**30, 2**31)."""
    multiplier, shift = quant.quantize_multiplier(0.3)
    assert 2**30 <= multiplier < 2**31
    assert multiplier * 2.0 ** (shift - 31) == pytest.approx(0.3, rel=1e-9)
    assert quant.quantize_multiplier(0.0) == (0, 0)


def test_requantize_matches_multiplying_by_the_real_scale():
    """requantize applies the fixed-point multiplier, the zero point and the clamp."""
    multiplier, shift = quant.quantize_multiplier(0.25)
    got = quant.requantize(np.array([40, -40, 4000]), multiplier, shift, 1, (-128, 127), np.int8)
    np.testing.assert_array_equal(got, [11, -9, 127])


def test_channel_scales_refuses_a_wrong_count():
    """channel_scales broadcasts one scale and refuses a count that is neither 1 nor channels."""
    np.testing.assert_array_equal(quant.channel_scales(q(0.5), 3), [0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="expected 1 or 4 quantization scales"):
        quant.channel_scales(q([1.0, 2.0]), 4)


# -- offload.geometry -------------------------------------------------------------------------


def test_same_padding_puts_the_odd_pixel_after():
    """SAME: ceil(size / stride) outputs, the odd padding pixel at the bottom / right."""
    g = geometry.geometry("SAME", (6, 6), (2, 2), (2, 2))
    assert (g.out_h, g.pad_top, g.pad_bottom) == (3, 0, 0)
    g = geometry.geometry("SAME", (5, 5), (4, 4), (1, 1))
    assert (g.out_h, g.pad_top, g.pad_bottom, g.pad_left, g.pad_right) == (5, 1, 2, 1, 2)


def test_valid_window_larger_than_input_is_empty():
    """VALID with a filter up to a stride larger than the input gives an empty output."""
    assert geometry.output_size("VALID", 2, 3, 2) == 0


def test_window_geometry_refuses_bad_strides():
    """window_geometry refuses a zero stride, saying what it expected."""
    with pytest.raises(ValueError, match="expected strides and dilations >= 1"):
        geometry.window_geometry("SAME", (4, 4), (3, 3), (0, 1))


def test_window_options_reads_conv_options():
    """window_options gives (stride, dilation, padding, activation) with TFLite's defaults."""
    opts = {"stride_h": 2, "stride_w": 1, "padding": "VALID"}
    assert geometry.window_options(opts) == ((2, 1), (1, 1), "VALID", "NONE")


# -- offload.ops.output_shapes ----------------------------------------------------------------


def basic_lstm(state_shape: tuple[int, ...]) -> offload.Model:
    b = builder.ModelBuilder()
    x = b.add_input("x", (1, 3), np.float32)
    h = b.add_tensor("h", (1, 2), np.float32, is_variable=True)
    w = b.add_constant("w", np.zeros((8, 5), np.float32))
    bias = b.add_constant("b", np.zeros((8,), np.float32))
    c = b.add_tensor("c", state_shape, np.float32, is_variable=True)
    shapes = [(1, 2), (1, 2), (1, 5), (1, 8)]
    outs = [b.add_tensor(f"o{i}", shape, np.float32) for i, shape in enumerate(shapes)]
    b.add_operator("LSTM", [x, h, w, bias, c], outs, {"kernel_type": "BASIC"})
    b.add_output(outs[0])
    return offload.load_model(model_content=b.build())


def test_output_shapes_gives_the_cpu_reference_rule():
    """output_shapes computes a node's output shapes with LiteRT's Prepare checks."""
    model = basic_lstm((1, 2))
    assert output_shapes(model.main.nodes[0], model.main) == [(1, 2), (1, 2), (1, 5), (1, 8)]


def test_output_shapes_raises_a_typed_error_naming_the_node():
    """Inputs the op cannot take raise TensorShapeError with the node and the problem."""
    model = basic_lstm((1, 3))
    with pytest.raises(TensorShapeError, match=r"LSTM.*previous state of shape \[1, 2\]"):
        output_shapes(model.main.nodes[0], model.main)


def test_strided_slice_ranges_resolve_masks_and_clamping_as_the_reference():
    """strided_slice_ranges gives the positions read per axis, clamped as LiteRT clamps; their
    lengths are the output shape output_shapes computes, and their values the slice run()."""
    from offload.geometry import strided_slice_ranges

    x = np.arange(4 * 5 * 6).reshape(4, 5, 6)
    options = {"begin_mask": 0b100, "end_mask": 0, "shrink_axis_mask": 0b001}
    begin, end, strides = [-1, 9, 5], [0, -9, 0], [1, -2, -1]
    ranges = strided_slice_ranges(x.shape, options, begin, end, strides)
    assert ranges == [3, range(4, -1, -2), range(5, 0, -1)]
    taken = x[np.ix_([3], list(ranges[1]), list(ranges[2]))][0]
    assert np.array_equal(taken, x[3, 4::-2, 5:0:-1])
    # A new axis reads one position; the ellipsis stands for the axes the spec leaves out.
    new = strided_slice_ranges(
        (4, 5), {"new_axis_mask": 1, "ellipsis_mask": 2}, [0, 0], [1, 1], [1, 1]
    )
    assert new == [range(1), range(4), range(5)]
    with pytest.raises(ValueError, match="cannot shrink axis 0 at begin 7"):
        strided_slice_ranges((6,), {"shrink_axis_mask": 1}, [7], [8], [1])

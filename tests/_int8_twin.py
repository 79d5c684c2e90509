"""An int8 twin of the dummy delegate, written against the public API alone: CONV_2D,
DEPTHWISE_CONV_2D, FULLY_CONNECTED, ADD, AVERAGE_POOL_2D and MAX_POOL_2D on int8 tensors, in
numpy with exact integer accumulation, requantized by :mod:`offload.quant`'s rule for each op.

It is the kit's worked example of an integer delegate that claims LiteRT's arithmetic:
``python -m offload.testing tests/_int8_twin.py --strict --exact`` passes with no exclusions.
Each rule is a class attribute, so a test can swap a wrong one in and watch the kit fail.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

import offload
from offload import Capabilities, Delegate, DelegateKernel, ModelTypeSupport, OpCapability, quant
from offload.geometry import geometry, window_options
from offload.ops import output_shapes

_NO = ModelTypeSupport(support="no", reason="int8 tensors only")
_YES = ModelTypeSupport(support="partial", reason="six int8 ops")
_ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")
_INT8 = ("int8",)

Requantize = Callable[..., np.ndarray]


def _padded(x: np.ndarray, g: offload.geometry.Geometry, value: int) -> np.ndarray:
    pads = ((0, 0), (g.pad_top, g.pad_bottom), (g.pad_left, g.pad_right), (0, 0))
    return np.pad(x, pads, constant_values=value)


def _windows(x: np.ndarray, g, kernel_hw, stride, dilation):  # noqa: ANN001, ANN202
    """Each filter tap's (N, OH, OW, C) slice of the padded input, in filter order."""
    for ky in range(kernel_hw[0]):
        for kx in range(kernel_hw[1]):
            top, left = ky * dilation[0], kx * dilation[1]
            yield (
                ky,
                kx,
                x[
                    :,
                    top : top + (g.out_h - 1) * stride[0] + 1 : stride[0],
                    left : left + (g.out_w - 1) * stride[1] + 1 : stride[1],
                ],
            )


class Int8TwinKernel(DelegateKernel):
    """Runs one partition node by node, each through its op's function."""

    def __init__(self, delegate: Int8TwinDelegate) -> None:
        self.rules = delegate

    def init(self, subgraph: offload.Subgraph, partition: offload.Partition) -> None:
        self.subgraph = subgraph
        self.partition = partition
        self.nodes = [subgraph.nodes[n] for n in partition.nodes]
        self.constants = {t: subgraph.tensors[t].constant_value() for t in partition.constants}

    def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        values = dict(self.constants)
        values.update(zip(self.partition.inputs, inputs))
        for node in self.nodes:
            args = [values[t] if t >= 0 else None for t in node.inputs]
            run = getattr(self, "_" + node.op.lower())
            values[node.outputs[0]] = run(node, *args)
        return [values[t] for t in self.partition.outputs]

    # --- helpers ---------------------------------------------------------------------------

    def _tensor(self, index: int) -> offload.Tensor:
        return self.subgraph.tensors[index]

    def _clamp(self, node: offload.Node) -> tuple[int, int]:
        out = self._tensor(node.outputs[0])
        activation = node.options.get("fused_activation_function", "NONE") or "NONE"
        return quant.activation_range_quantized(activation, out.quantization, out.dtype)

    def _conv_params(self, node: offload.Node, channels: int) -> tuple:  # noqa: ANN401
        x, w = (self._tensor(node.inputs[i]) for i in (0, 1))
        out = self._tensor(node.outputs[0])
        multiplier, shift = quant.conv_multipliers(x, w, out, channels)
        return multiplier, shift, quant.scale_zero_point(out)[1], self._clamp(node)

    # --- ops ---------------------------------------------------------------------------------

    def _conv_2d(self, node, x, w, bias=None):  # noqa: ANN001, ANN202
        stride, dilation, padding, _ = window_options(node.options)
        out_ch, kh, kw, _ = w.shape
        g = geometry(padding, x.shape[1:3], (kh, kw), stride, dilation)
        x_zp = quant.scale_zero_point(self._tensor(node.inputs[0]))[1]
        # Pad with the zero point: padded cells then contribute (zp - zp) * w = 0.
        xp = _padded(x, g, x_zp).astype(np.int64) - x_zp
        acc = np.zeros((x.shape[0], g.out_h, g.out_w, out_ch), np.int64)
        for ky, kx, tap in _windows(xp, g, (kh, kw), stride, dilation):
            acc += tap @ w[:, ky, kx, :].astype(np.int64).T
        if bias is not None:
            acc += bias.astype(np.int64)
        return self.rules.conv_rule(acc, *self._conv_params(node, out_ch), np.int8)

    def _depthwise_conv_2d(self, node, x, w, bias=None):  # noqa: ANN001, ANN202
        stride, dilation, padding, _ = window_options(node.options)
        _, kh, kw, out_ch = w.shape
        g = geometry(padding, x.shape[1:3], (kh, kw), stride, dilation)
        x_zp = quant.scale_zero_point(self._tensor(node.inputs[0]))[1]
        # Output channel c * M + m reads input channel c.
        xp = np.repeat(_padded(x, g, x_zp).astype(np.int64) - x_zp, out_ch // x.shape[3], axis=3)
        acc = np.zeros((x.shape[0], g.out_h, g.out_w, out_ch), np.int64)
        for ky, kx, tap in _windows(xp, g, (kh, kw), stride, dilation):
            acc += tap * w[0, ky, kx].astype(np.int64)
        if bias is not None:
            acc += bias.astype(np.int64)
        return self.rules.depthwise_rule(acc, *self._conv_params(node, out_ch), np.int8)

    def _fully_connected(self, node, x, w, bias=None):  # noqa: ANN001, ANN202
        (shape,) = output_shapes(node, self.subgraph, [x.shape, w.shape])[:1]
        x_zp = quant.scale_zero_point(self._tensor(node.inputs[0]))[1]
        rows = x.reshape(-1, w.shape[1]).astype(np.int64) - x_zp
        acc = rows @ w.astype(np.int64).T
        if bias is not None:
            acc += bias.astype(np.int64)
        out = self.rules.fully_connected_rule(acc, *self._conv_params(node, w.shape[0]), np.int8)
        return out.reshape(shape)

    def _add(self, node, a, b):  # noqa: ANN001, ANN202
        in1, in2, out = (self._tensor(t) for t in (*node.inputs[:2], node.outputs[0]))
        return self.rules.add_rule(a, b, quant.add_params(in1, in2, out), self._clamp(node))

    def _max_pool_2d(self, node, x):  # noqa: ANN001, ANN202
        o = node.options
        kernel_hw, stride = (o.filter_height, o.filter_width), (o.stride_h, o.stride_w)
        g = geometry(o.get("padding", "SAME"), x.shape[1:3], kernel_hw, stride)
        # Padding never wins a max: every window holds at least one input cell.
        xp = _padded(x, g, -128)
        taps = [tap for _, _, tap in _windows(xp, g, kernel_hw, stride, (1, 1))]
        lo, hi = self._clamp(node)
        return np.clip(np.max(taps, axis=0), lo, hi).astype(np.int8)

    def _average_pool_2d(self, node, x):  # noqa: ANN001, ANN202
        o = node.options
        kernel_hw, stride = (o.filter_height, o.filter_width), (o.stride_h, o.stride_w)
        g = geometry(o.get("padding", "SAME"), x.shape[1:3], kernel_hw, stride)
        # Padded cells are not averaged: count the input cells in each window.
        total = sum(
            tap
            for _, _, tap in _windows(
                _padded(x.astype(np.int64), g, 0), g, kernel_hw, stride, (1, 1)
            )
        )
        ones = _padded(np.ones((1, *x.shape[1:3], 1), np.int64), g, 0)
        count = sum(tap for _, _, tap in _windows(ones, g, kernel_hw, stride, (1, 1)))
        # The integer mean, halves away from zero (C's truncating division of sum +- count/2).
        half = count // 2
        mean = np.where(total >= 0, (total + half) // count, -((-total + half) // count))
        lo, hi = self._clamp(node)
        return np.clip(mean, lo, hi).astype(np.int8)


def _int8(op: str, versions: tuple[int, int], **extra: object) -> OpCapability:
    return OpCapability(op=op, versions=versions, dtypes=_INT8, max_rank=4, **extra)


class Int8TwinDelegate(Delegate):
    name = "int8_twin"
    version = "0.1.0"
    CAPABILITIES = Capabilities(
        ops=(
            _int8("CONV_2D", (1, 3), fused_activations=_ACTIVATIONS, constant_inputs=(1, 2)),
            _int8(
                "DEPTHWISE_CONV_2D", (1, 3), fused_activations=_ACTIVATIONS, constant_inputs=(1, 2)
            ),
            _int8(
                "FULLY_CONNECTED", (1, 4), fused_activations=_ACTIVATIONS, constant_inputs=(1, 2)
            ),
            _int8("ADD", (1, 2), fused_activations=_ACTIVATIONS, max_inputs=2),
            _int8("AVERAGE_POOL_2D", (1, 2), fused_activations=_ACTIVATIONS),
            _int8("MAX_POOL_2D", (1, 2), fused_activations=_ACTIVATIONS),
        ),
        model_types={
            "float32": _NO,
            "float16": _NO,
            "dynamic_range": _NO,
            "int8": _YES,
            "qat": _YES,
        },
    )

    # LiteRT's rule per op on x86 (offload.quant's table); tests swap in wrong ones.
    conv_rule: Requantize = staticmethod(quant.requantize_conv)
    fully_connected_rule: Requantize = staticmethod(quant.requantize_conv)
    depthwise_rule: Requantize = staticmethod(quant.requantize_depthwise)
    add_rule: Callable[..., np.ndarray] = staticmethod(quant.add_int8)

    def check_node(self, node: offload.Node, subgraph: offload.Subgraph) -> str | None:
        tensors = [subgraph.tensors[t] for t in node.inputs if t >= 0]
        out = subgraph.tensors[node.outputs[0]]
        if not all(quant.is_quantized(t) for t in (tensors[0], out)):
            return "expected quantized int8 input and output"
        if node.op == "CONV_2D" and tensors[0].shape[3] != tensors[1].shape[3]:
            return "grouped convolutions (LiteRT runs its reference kernel for them)"
        if node.op == "FULLY_CONNECTED" and node.options.get("weights_format", 0) not in (
            0,
            "DEFAULT",
        ):
            return "shuffled weights"
        if node.op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
            if tensors[1].dtype != np.int8:
                return f"expected int8 weights, found {tensors[1].dtype}"
        return None

    def create_kernel(self) -> Int8TwinKernel:
        return Int8TwinKernel(self)

"""One delegated partition -> one Core ML ML Program, built with coremltools' MIL builder.

The program is built straight from offload's graph (no TensorFlow in between):

* **Layout.** TFLite is NHWC, MIL's conv and pool are NCHW. Every 4-D tensor lives in the
  program as NCHW; tensors of other ranks keep TFLite's layout. Transposes appear only at the
  partition's edges (a 4-D boundary input or output) and where TFLite semantics need the
  memory order (RESHAPE / FULLY_CONNECTED of a 4-D tensor); when the move is trivial
  (C == 1 or H == W == 1) a reshape stands in for the transpose.
* **Weights** are ``const`` ops: the subgraph's constants. float16 and sparse weights arrive
  as float32 constants already (offload's core folds DEQUANTIZE / DENSIFY of constants before
  planning), so they are never partition boundary tensors.
* **Padding** is always ``pad_type="custom"`` with TFLite's SAME split (the extra pixel after),
  so the program does not depend on how a runtime reads "same".
* **Names.** Program inputs are ``in_<tensor index>``, outputs ``out_<tensor index>``; op
  names start with ``n<node index>_`` so a runtime error points back at the TFLite node.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from offload import Node, Partition, Subgraph
from offload.geometry import geometry, window_options
from offload_coreml._support import constant_value

__all__ = ["ConversionError", "ConvertedPartition", "build_program", "deployment_target"]


class ConversionError(RuntimeError):
    """A partition could not be expressed as an ML Program (names the node and why)."""


@dataclass
class ConvertedPartition:
    """A partition's program and how its boundary maps onto the program's inputs and outputs."""

    program: Any
    inputs: list[tuple[int, str]]  # (tensor index, program input name)
    outputs: list[tuple[int, str]]  # (tensor index, program output name)
    seconds: float = 0.0


def deployment_target(coreml_version: int) -> Any:
    """``ct.target`` for a Core ML version: ML Programs start at Core ML 5 (iOS 15 / macOS 12),
    so versions 2-5 all map to iOS15; 6, 7, 8 map to iOS16, iOS17, iOS18."""
    import coremltools as ct

    return {6: ct.target.iOS16, 7: ct.target.iOS17, 8: ct.target.iOS18}.get(
        coreml_version, ct.target.iOS15
    )


_NHWC_TO_NCHW_AXIS = {0: 0, 1: 2, 2: 3, 3: 1}


def _nchw(shape: Sequence[int]) -> tuple[int, ...]:
    n, h, w, c = shape
    return (n, c, h, w)


def _trivial(shape: Sequence[int]) -> bool:
    """NHWC <-> NCHW keeps memory order when C == 1 or H*W == 1: a reshape will do."""
    _, h, w, c = shape
    return c == 1 or h * w == 1


def _window_pads(node: Node, in_hw: tuple[int, int], filter_hw: tuple[int, int]) -> list[int]:
    """[top, bottom, left, right] padding of a conv or pool window, as TFLite pads it (SAME's
    extra pixel after, none for VALID): :func:`offload.geometry.geometry`."""
    stride, dilation, padding, _ = window_options(node.options)
    g = geometry(padding, in_hw, filter_hw, stride, dilation)
    return [g.pad_top, g.pad_bottom, g.pad_left, g.pad_right]


class _Builder:
    """Walks one partition's nodes in order, emitting MIL ops into the current block."""

    def __init__(self, subgraph: Subgraph) -> None:
        from coremltools.converters.mil import Builder as mb

        self.mb = mb
        self.sg = subgraph
        self.env: dict[int, Any] = {}
        self.node: Node | None = None
        self.count = 0

    # -- helpers ----------------------------------------------------------------------------

    def name(self, what: str) -> str:
        assert self.node is not None
        self.count += 1
        return f"n{self.node.index}_{what}_{self.count}"

    def shape(self, t: int) -> tuple[int, ...]:
        return tuple(int(d) for d in self.sg.tensors[t].shape)

    def const(self, t: int) -> np.ndarray:
        value = constant_value(self.sg, t)
        if value is None:
            where = self.node.describe() if self.node else "partition"
            raise ConversionError(f"{where}: tensor {t} is not a constant")
        return value

    def var(self, t: int) -> Any:
        """The program value of a runtime tensor (4-D tensors come back NCHW)."""
        if t in self.env:
            return self.env[t]
        raise ConversionError(
            f"{self.node.describe() if self.node else 'partition'}: tensor {t} "
            f"({self.sg.tensors[t].name!r}) is neither computed in the partition nor a constant"
        )

    def plain_to_nchw(self, x: Any, shape: Sequence[int]) -> Any:
        mb = self.mb
        if _trivial(shape):
            return mb.reshape(x=x, shape=list(_nchw(shape)), name=self.name("to_nchw"))
        if tuple(x.shape) != tuple(shape):
            x = mb.reshape(x=x, shape=list(shape), name=self.name("reshape"))
        return mb.transpose(x=x, perm=[0, 3, 1, 2], name=self.name("to_nchw"))

    def nchw_to_plain(self, x: Any, shape: Sequence[int]) -> Any:
        mb = self.mb
        if _trivial(shape):
            return mb.reshape(x=x, shape=list(shape), name=self.name("to_nhwc"))
        return mb.transpose(x=x, perm=[0, 2, 3, 1], name=self.name("to_nhwc"))

    def plain(self, t: int) -> Any:
        """A runtime tensor in TFLite's layout."""
        x = self.var(t)
        shape = self.shape(t)
        return self.nchw_to_plain(x, shape) if len(shape) == 4 else x

    def operand(self, t: int, rank: int) -> Any:
        """An elementwise operand laid out for a result of ``rank`` (4 -> NCHW)."""
        shape = self.shape(t)
        value = constant_value(self.sg, t)
        if value is not None:
            value = np.asarray(value, dtype=np.float32)
            if rank == 4:
                value = value.reshape((1,) * (4 - value.ndim) + value.shape).transpose(0, 3, 1, 2)
            return value
        x = self.var(t)
        if rank == 4 and len(shape) < 4:
            return self.plain_to_nchw(x, (1,) * (4 - len(shape)) + shape)
        return x

    def activation(self, x: Any, act: str | None) -> Any:
        mb = self.mb
        if act in (None, "NONE"):
            return x
        if act == "RELU":
            return mb.relu(x=x, name=self.name("relu"))
        if act == "RELU6":
            return mb.relu6(x=x, name=self.name("relu6"))
        if act == "RELU_N1_TO_1":
            return mb.clip(x=x, alpha=-1.0, beta=1.0, name=self.name("clip"))
        if act == "TANH":
            return mb.tanh(x=x, name=self.name("tanh"))
        where = self.node.describe() if self.node else "?"
        raise ConversionError(f"{where}: fused activation {act} has no Core ML conversion")

    def set_output(self, t: int, x: Any) -> None:
        shape = self.shape(t)
        want = _nchw(shape) if len(shape) == 4 else shape
        got = tuple(int(d) for d in x.shape)
        if got != want:
            raise ConversionError(
                f"{self.node.describe() if self.node else '?'}: the program computes shape "
                f"{list(got)} for tensor {t}, TFLite says {list(want)} (layout "
                f"{'NCHW' if len(shape) == 4 else 'TFLite'})"
            )
        self.env[t] = x

    # -- ops --------------------------------------------------------------------------------

    def convert(self, node: Node) -> None:
        self.node = node
        method = getattr(self, f"op_{node.op.lower()}", None)
        if method is None:
            raise ConversionError(f"{node.describe()}: no Core ML conversion for {node.op}")
        result = method(node)
        act = node.options.get("fused_activation_function")
        self.set_output(node.outputs[0], self.activation(result, act))

    def _binary(self, node: Node, fn: Any) -> Any:
        a, b = node.inputs
        rank = len(self.sg.tensors[node.outputs[0]].shape)
        return fn(x=self.operand(a, rank), y=self.operand(b, rank), name=self.name(node.op.lower()))

    def op_add(self, node: Node) -> Any:
        return self._binary(node, self.mb.add)

    def op_mul(self, node: Node) -> Any:
        return self._binary(node, self.mb.mul)

    def _conv(self, node: Node, weight: np.ndarray, groups: int) -> Any:
        o = node.options
        x = self.var(node.inputs[0])
        _, h, w, _ = self.shape(node.inputs[0])
        kh, kw = weight.shape[2:]
        dh, dw = o.get("dilation_h_factor", 1), o.get("dilation_w_factor", 1)
        pad = _window_pads(node, (h, w), (kh, kw))
        bias = None
        if len(node.inputs) > 2 and node.inputs[2] >= 0:
            bias = np.asarray(self.const(node.inputs[2]), np.float32)
        kwargs: dict[str, Any] = {"bias": bias} if bias is not None else {}
        return self.mb.conv(
            x=x,
            weight=weight,
            strides=[o.stride_h, o.stride_w],
            pad_type="custom",
            pad=pad,
            dilations=[dh, dw],
            groups=groups,
            name=self.name("conv"),
            **kwargs,
        )

    def op_conv_2d(self, node: Node) -> Any:
        w = np.asarray(self.const(node.inputs[1]), np.float32)  # [O, kH, kW, I/groups]
        c_in = self.shape(node.inputs[0])[3]
        return self._conv(node, np.ascontiguousarray(w.transpose(0, 3, 1, 2)), c_in // w.shape[3])

    def op_depthwise_conv_2d(self, node: Node) -> Any:
        w = np.asarray(self.const(node.inputs[1]), np.float32)  # [1, kH, kW, C*M]
        c_in = self.shape(node.inputs[0])[3]
        return self._conv(node, np.ascontiguousarray(w.transpose(3, 0, 1, 2)), c_in)

    def op_transpose_conv(self, node: Node) -> Any:
        o = node.options
        out = [int(v) for v in self.const(node.inputs[0]).reshape(-1)]
        w = np.asarray(self.const(node.inputs[1]), np.float32)  # [O, kH, kW, I]
        _, h_in, w_in, _ = self.shape(node.inputs[2])
        # TFLite pads as for the conv whose input is the transposed conv's output.
        top, _, left, _ = _window_pads(node, (out[1], out[2]), (w.shape[1], w.shape[2]))
        pad: list[int] = []
        for size, target, k, s, before in (
            (h_in, out[1], w.shape[1], o.stride_h, top),
            (w_in, out[2], w.shape[2], o.stride_w, left),
        ):
            after = (size - 1) * s + k - target - before
            if after < 0:
                raise ConversionError(f"{node.describe()}: output {target} exceeds the full result")
            pad += [before, after]
        kwargs: dict[str, Any] = {}
        if len(node.inputs) > 3 and node.inputs[3] >= 0:
            kwargs["bias"] = np.asarray(self.const(node.inputs[3]), np.float32)
        return self.mb.conv_transpose(
            x=self.var(node.inputs[2]),
            weight=np.ascontiguousarray(w.transpose(3, 0, 1, 2)),
            strides=[o.stride_h, o.stride_w],
            pad_type="custom",
            pad=pad,
            dilations=[1, 1],
            groups=1,
            name=self.name("conv_transpose"),
            **kwargs,
        )

    def _pool(self, node: Node, fn: Any, **extra: Any) -> Any:
        o = node.options
        _, h, w, _ = self.shape(node.inputs[0])
        pad = _window_pads(node, (h, w), (o.filter_height, o.filter_width))
        return fn(
            x=self.var(node.inputs[0]),
            kernel_sizes=[o.filter_height, o.filter_width],
            strides=[o.stride_h, o.stride_w],
            pad_type="custom",
            pad=pad,
            name=self.name(fn.__name__ if hasattr(fn, "__name__") else "pool"),
            **extra,
        )

    def op_average_pool_2d(self, node: Node) -> Any:
        return self._pool(node, self.mb.avg_pool, exclude_padding_from_average=True)

    def op_max_pool_2d(self, node: Node) -> Any:
        return self._pool(node, self.mb.max_pool)

    def _pad(self, node: Node, mode: str, value: float = 0.0) -> Any:
        p = np.asarray(self.const(node.inputs[1])).reshape(4, 2).astype(np.int64)
        pad = np.array([p[1, 0], p[1, 1], p[2, 0], p[2, 1]], np.int32)
        kwargs: dict[str, Any] = {"constant_val": np.float32(value)} if mode == "constant" else {}
        return self.mb.pad(
            x=self.var(node.inputs[0]), pad=pad, mode=mode, name=self.name("pad"), **kwargs
        )

    def op_pad(self, node: Node) -> Any:
        return self._pad(node, "constant")

    def op_padv2(self, node: Node) -> Any:
        value = 0.0
        if len(node.inputs) > 2 and node.inputs[2] >= 0:
            value = float(np.asarray(self.const(node.inputs[2])).reshape(-1)[0])
        return self._pad(node, "constant", value)

    def op_mirror_pad(self, node: Node) -> Any:
        return self._pad(node, "reflect")

    def op_concatenation(self, node: Node) -> Any:
        rank = len(self.shape(node.outputs[0]))
        axis = 1 if rank == 4 else rank - 1
        values = [self.operand(t, rank) for t in node.inputs]
        return self.mb.concat(values=values, axis=axis, interleave=False, name=self.name("concat"))

    def op_fully_connected(self, node: Node) -> Any:
        mb = self.mb
        w = np.asarray(self.const(node.inputs[1]), np.float32)  # [N, K]
        x = self.plain(node.inputs[0])
        if len(x.shape) != 2:
            x = mb.reshape(x=x, shape=[1, w.shape[1]], name=self.name("flatten"))
        kwargs: dict[str, Any] = {}
        if len(node.inputs) > 2 and node.inputs[2] >= 0:
            kwargs["bias"] = np.asarray(self.const(node.inputs[2]), np.float32)
        y = mb.linear(x=x, weight=w, name=self.name("linear"), **kwargs)
        return self._from_plain(y, self.shape(node.outputs[0]))

    def _from_plain(self, y: Any, out: tuple[int, ...]) -> Any:
        """Bring a TFLite-layout result to the output's shape (and to NCHW if 4-D)."""
        if len(out) == 4:
            return self.plain_to_nchw(y, out)
        if tuple(y.shape) != out:
            return self.mb.reshape(x=y, shape=list(out), name=self.name("reshape"))
        return y

    def op_reshape(self, node: Node) -> Any:
        src, out = self.shape(node.inputs[0]), self.shape(node.outputs[0])
        if src == out:
            return self.var(node.inputs[0])
        return self._from_plain(self.plain(node.inputs[0]), out)

    def op_mean(self, node: Node) -> Any:
        mb = self.mb
        shape = self.shape(node.inputs[0])
        rank = len(shape)
        axes = sorted({int(a) % rank for a in np.asarray(self.const(node.inputs[1])).reshape(-1)})
        keep = bool(node.options.get("keep_dims", False))
        out = self.shape(node.outputs[0])
        if rank != 4:
            return mb.reduce_mean(
                x=self.var(node.inputs[0]), axes=axes, keep_dims=keep, name=self.name("mean")
            )
        y = mb.reduce_mean(
            x=self.var(node.inputs[0]),
            axes=[_NHWC_TO_NCHW_AXIS[a] for a in axes],
            keep_dims=True,
            name=self.name("mean"),
        )
        if keep:
            return y
        kept = tuple(1 if i in axes else d for i, d in enumerate(shape))
        return self._from_plain(self.nchw_to_plain(y, kept), out)

    def op_softmax(self, node: Node) -> Any:
        rank = len(self.shape(node.inputs[0]))
        return self.mb.softmax(
            x=self.var(node.inputs[0]), axis=1 if rank == 4 else -1, name=self.name("softmax")
        )

    def op_resize_bilinear(self, node: Node) -> Any:
        o = node.options
        h, w = (int(v) for v in self.const(node.inputs[1]).reshape(-1))
        if o.get("align_corners"):
            mode = "STRICT_ALIGN_CORNERS"
        elif o.get("half_pixel_centers"):
            mode = "UNALIGN_CORNERS"
        else:
            mode = "DEFAULT"
        return self.mb.resize_bilinear(
            x=self.var(node.inputs[0]),
            target_size_height=h,
            target_size_width=w,
            sampling_mode=mode,
            name=self.name("resize"),
        )

    def op_hard_swish(self, node: Node) -> Any:
        x = self.var(node.inputs[0])
        gate = self.mb.sigmoid_hard(x=x, alpha=1.0 / 6.0, beta=0.5, name=self.name("gate"))
        return self.mb.mul(x=x, y=gate, name=self.name("hard_swish"))

    def _unary(self, node: Node, fn: Any, **kw: Any) -> Any:
        return fn(x=self.var(node.inputs[0]), name=self.name(node.op.lower()), **kw)

    def op_logistic(self, node: Node) -> Any:
        return self._unary(node, self.mb.sigmoid)

    def op_tanh(self, node: Node) -> Any:
        return self._unary(node, self.mb.tanh)

    def op_relu(self, node: Node) -> Any:
        return self._unary(node, self.mb.relu)

    def op_relu6(self, node: Node) -> Any:
        return self._unary(node, self.mb.relu6)

    def op_relu_n1_to_1(self, node: Node) -> Any:
        return self._unary(node, self.mb.clip, alpha=-1.0, beta=1.0)


def build_program(
    subgraph: Subgraph, partition: Partition, coreml_version: int = 5
) -> ConvertedPartition:
    """The ML Program (a ``coremltools`` MIL ``Program``) computing ``partition``."""
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.mil import Function, Program

    start = time.perf_counter()
    tensors = subgraph.tensors
    runtime_in = list(partition.inputs)
    inputs = [(t, f"in_{t}") for t in runtime_in]
    outputs = [(t, f"out_{t}") for t in partition.outputs]
    if not runtime_in:
        raise ConversionError(
            f"partition {partition.index} computes its outputs from constants only; "
            "an ML Program needs at least one input"
        )
    for t in runtime_in:
        if tensors[t].dtype != np.float32:
            raise ConversionError(f"boundary input {t} is {tensors[t].dtype}, expected float32")
    specs = {name: mb.TensorSpec(shape=tensors[t].shape) for t, name in inputs}
    with Function(specs, opset_version=deployment_target(coreml_version)) as func:
        b = _Builder(subgraph)
        for t, name in inputs:
            x = func.inputs[name]
            shape = tuple(tensors[t].shape)
            b.env[t] = (
                mb.transpose(x=x, perm=[0, 3, 1, 2], name=f"{name}_nchw") if len(shape) == 4 else x
            )
        for n in partition.nodes:
            b.convert(subgraph.nodes[n])
        b.node = None
        results = []
        for t, name in outputs:
            x = b.env[t]
            if len(tensors[t].shape) == 4:
                results.append(mb.transpose(x=x, perm=[0, 2, 3, 1], name=name))
            else:
                results.append(mb.identity(x=x, name=name))
        func.set_outputs(results)
    program = Program()
    program.add_function("main", func)
    return ConvertedPartition(program, inputs, outputs, time.perf_counter() - start)


def to_mlmodel(
    program: Any,
    compute_precision: str = "float16",
    compute_units: str = "ALL",
    coreml_version: int = 5,
    load: bool = False,
) -> Any:
    """``ct.convert`` the program to an ML Program ``MLModel`` (not loaded unless ``load``)."""
    import coremltools as ct

    precision = ct.precision.FLOAT16 if compute_precision == "float16" else ct.precision.FLOAT32
    return ct.convert(
        program,
        convert_to="mlprogram",
        compute_precision=precision,
        compute_units=getattr(ct.ComputeUnit, compute_units),
        minimum_deployment_target=deployment_target(coreml_version),
        skip_model_load=not load,
    )

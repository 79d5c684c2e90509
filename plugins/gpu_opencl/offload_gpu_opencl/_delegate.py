"""The gpu_opencl delegate: options, declared capabilities and per-node checks."""

from __future__ import annotations

import numpy as np

import offload
from offload import Capabilities, Delegate, DelegateOptions, ModelTypeSupport, OpCapability
from offload.errors import TensorShapeError
from offload.ops._lstm_basic import check_shapes
from offload_gpu_opencl._device import probe
from offload_gpu_opencl._kernel import GpuKernel
from offload_gpu_opencl._lower import densify_reason, foldable, shape_reason

__all__ = ["GpuOpenCLDelegate", "GpuOpenCLOptions", "capabilities"]

__version__ = "0.1.0"

_ACTS = ("NONE", "RELU", "RELU_N1_TO_1", "RELU6", "TANH", "SIGMOID")
_FLOAT = ("float32", "float16")
_QUANT = ("float32", "float16", "int8", "uint8")

# op -> (float versions, quantized versions, has a fused activation); LiteRT's GPU op list.
_OPS: dict[str, tuple[tuple[int, int], tuple[int, int], bool]] = {
    "ADD": ((1, 1), (1, 2), True),
    "AVERAGE_POOL_2D": ((1, 1), (1, 2), True),
    "CONCATENATION": ((1, 1), (1, 2), True),
    # Hybrid (dynamic-range) versions run as float convolutions on dequantized weights:
    # CONV_2D v2/v5, DEPTHWISE_CONV_2D v4/v6, FULLY_CONNECTED v3/v9/v12. The int16 and
    # sparse versions in between stay out through the dtype and constant-weight checks.
    "CONV_2D": ((1, 1), (1, 5), True),
    "DEPTHWISE_CONV_2D": ((1, 2), (1, 6), True),
    "EXP": ((1, 1), (1, 1), False),
    "FULLY_CONNECTED": ((1, 1), (1, 12), True),
    "LOGISTIC": ((1, 1), (1, 2), False),
    "LSTM": ((2, 2), (2, 2), True),  # the BASIC kernel only (float32; see _LSTM_OPTIONS)
    "MAX_POOL_2D": ((1, 1), (1, 2), True),
    "MAXIMUM": ((1, 1), (1, 2), False),
    "MINIMUM": ((1, 1), (1, 2), False),
    "MUL": ((1, 1), (1, 2), True),
    "PAD": ((1, 1), (1, 2), False),
    "PRELU": ((1, 1), (1, 1), False),
    "RELU": ((1, 1), (1, 2), False),
    "RELU6": ((1, 1), (1, 2), False),
    "RESHAPE": ((1, 1), (1, 1), False),
    "RESIZE_BILINEAR": ((1, 3), (1, 3), False),
    "SOFTMAX": ((1, 1), (1, 2), False),
    "STRIDED_SLICE": ((1, 1), (1, 2), False),
    "SUB": ((1, 1), (1, 2), True),
    "TRANSPOSE_CONV": ((1, 1), (1, 2), False),
    # Folded at init when their inputs are constants (float16 and sparse weights).
    "DEQUANTIZE": ((1, 3), (1, 3), False),
    "DENSIFY": ((1, 1), (1, 1), False),
}
_CONSTRAINTS = {
    "CONV_2D": (
        "weights and bias constant (or fp16/sparse constants behind DEQUANTIZE)",
        "no grouped convolution",
    ),
    "DEPTHWISE_CONV_2D": ("weights and bias constant",),
    "FULLY_CONNECTED": ("weights and bias constant", "weights_format DEFAULT"),
    "TRANSPOSE_CONV": ("output_shape, weights and bias constant",),
    "ADD": ("exactly two inputs whose shapes broadcast to rank <= 4",),
    "CONCATENATION": ("no fused activation (LiteRT's kernel rejects one)",),
    "STRIDED_SLICE": ("begin/end/strides constant; no ellipsis or new-axis masks; no offset",),
    "LSTM": (
        "kernel_type BASIC (op version 2), fused activation TANH, cell_clip 0 and proj_clip 0",
        "float32 tensors (the uint8 cell stays on the CPU)",
        "weights and biases constant; previous activation and state runtime tensors",
        "the new activation and state are written back into inputs 1 and 4, as on the CPU",
    ),
    "DENSIFY": ("a sparse constant input without block map, identity traversal order",),
}
_CONST_INPUTS = {"PAD": (1,), "STRIDED_SLICE": (1, 2, 3), "TRANSPOSE_CONV": (0,)}


_TWO_INPUTS = ("ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "PRELU")
# LiteRT's GPU delegate takes the BASIC LSTM only, always tanh and never clipped.
_LSTM_OPTIONS = {"kernel_type": "BASIC", "cell_clip": 0.0, "proj_clip": 0.0}
_OPTIONS: dict[str, dict[str, object]] = {"SOFTMAX": {"beta": 1.0}, "LSTM": _LSTM_OPTIONS}
_LSTM_INPUTS = ("input", "previous activation", "weights", "biases", "previous state")
_LSTM_OUTPUTS = ("activation", "state", "concat temp", "activation temp")


def _fused(op: str) -> tuple[str, ...]:
    return {"CONCATENATION": ("NONE",), "LSTM": ("TANH",)}.get(op, _ACTS)


def _dtypes(op: str, enable_quant: bool) -> tuple[str, ...]:
    if op == "LSTM":
        return ("float32",)
    return _QUANT if enable_quant else _FLOAT


def capabilities(enable_quant: bool) -> Capabilities:
    """The declaration for quantization on (default) or off."""
    ops = []
    for op, (fv, qv, fused) in _OPS.items():
        ops.append(
            OpCapability(
                op=op,
                versions=qv if enable_quant else fv,
                dtypes=_dtypes(op, enable_quant),
                max_rank=4,
                fused_activations=_fused(op) if fused else None,
                constant_inputs=_CONST_INPUTS.get(op, ()),
                max_inputs=2 if op in _TWO_INPUTS else None,
                options=_OPTIONS.get(op, {}),
                constraints=_CONSTRAINTS.get(op, ()),
            )
        )
    ops.append(OpCapability(op="LOGICAL_AND", dtypes=("bool",), max_rank=4, max_inputs=2))
    if enable_quant:
        ops.append(OpCapability(op="QUANTIZE", versions=(1, 2), dtypes=_QUANT, max_rank=4))
    view = "runs through a float view: constants dequantized once at init, 8-bit boundary "
    view += "tensors converted on the host each invoke"
    off = ModelTypeSupport(support="no", reason="quantized models need enable_quant=True")
    return Capabilities(
        ops=tuple(ops),
        model_types={
            "float32": ModelTypeSupport(support="yes"),
            "float16": ModelTypeSupport(
                support="yes", reason="float16 weights folded through DEQUANTIZE at init"
            ),
            "dynamic_range": ModelTypeSupport(support="yes", reason=view) if enable_quant else off,
            "int8": ModelTypeSupport(support="yes", reason=view) if enable_quant else off,
            "qat": ModelTypeSupport(support="yes", reason=view) if enable_quant else off,
        },
        precisions=("float32", "float16"),
        expected_speedup=1.5,  # measured 1.5x-3.3x vs the CPU reference on PoCL (README)
    )


_CAPS = {True: capabilities(True), False: capabilities(False)}


def _lstm_reason(node: offload.Node, subgraph: offload.Subgraph) -> str | None:
    """Why gpu_opencl does not take this LSTM node (the capabilities checked its version,
    dtypes, activation and options), or None: LiteRT's GPU delegate's BASIC cell needs all
    five inputs and four outputs, constant weights and biases, and the shapes of lstm.cc."""
    ins, outs, tensors = node.inputs, node.outputs, subgraph.tensors
    if len(ins) != 5 or len(outs) != 4 or min((*ins, *outs), default=0) < 0:
        found = f"{len(ins)} inputs and {len(outs)} outputs"
        missing = [n for n, t in zip((*_LSTM_INPUTS, *_LSTM_OUTPUTS), (*ins, *outs)) if t < 0]
        found += f" ({', '.join(missing)} omitted)" if missing else ""
        return f"expected the 5 inputs and 4 outputs of the BASIC LSTM cell, found {found}"
    for pos in (2, 3):
        if not foldable(subgraph, ins[pos]):
            return f"{_LSTM_INPUTS[pos]} (input {pos}) must be constant, found a runtime tensor"
        if tensors[ins[pos]].dtype != np.float32:  # as the CPU kernel (fp16 via DEQUANTIZE)
            found = tensors[ins[pos]].type_name
            return f"{_LSTM_INPUTS[pos]} (input {pos}) must be FLOAT32, found {found}"
    for pos in (1, 4):
        if foldable(subgraph, ins[pos]):
            return (
                f"{_LSTM_INPUTS[pos]} (input {pos}) must be a runtime tensor (a variable or an "
                "input: the cell writes its new value there), found a constant"
            )
    try:
        check_shapes([tensors[t].shape for t in ins], node.describe())
    except TensorShapeError as exc:
        return str(exc)
    (b, i), o = tensors[ins[0]].shape, tensors[ins[1]].shape[1]
    for name, t, want in zip(_LSTM_OUTPUTS, outs, ((b, o), (b, o), (b, i + o), (b, 4 * o))):
        found = list(tensors[t].shape)
        if tuple(found) != want:
            return f"expected the {name} output of shape {list(want)}, found {found}"
    return None


class GpuOpenCLOptions(DelegateOptions):
    """Options of the gpu_opencl delegate (LiteRT's GPU delegate options, plus device choice).

    ``precision_loss_allowed``: store tensors as half (and compute in half where the device has
    cl_khr_fp16). ``enable_quant``: run quantized models through the float view.
    ``serialization_dir`` / ``model_token``: cache compiled programs and transformed weights.
    ``platform`` / ``device``: an index or a case-insensitive name substring.
    """

    precision_loss_allowed: bool = False
    enable_quant: bool = True
    serialization_dir: str | None = None
    model_token: str | None = None
    platform: int | str | None = None
    device: int | str | None = None


class GpuOpenCLDelegate(Delegate):
    name = "gpu_opencl"
    version = __version__
    Options = GpuOpenCLOptions
    CAPABILITIES = _CAPS[True]

    @classmethod
    def availability(cls) -> offload.Availability:
        reason = probe()
        return offload.Availability(reason is None, reason or "")

    @property
    def capabilities(self) -> Capabilities:
        return _CAPS[self.options.enable_quant]

    def check_node(self, node: offload.Node, subgraph: offload.Subgraph) -> str | None:
        op, tensors = node.op, subgraph.tensors
        if op == "LSTM":
            return _lstm_reason(node, subgraph)
        if op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV"):
            positions = (1, 3) if op == "TRANSPOSE_CONV" else (1, 2)
            for pos in positions:
                if pos < len(node.inputs) and node.inputs[pos] >= 0:
                    what = "weights" if pos == 1 else "bias"
                    if tensors[node.inputs[pos]].type_name == "INT4":
                        return f"INT4 {what} are not supported"
                    if not foldable(subgraph, node.inputs[pos]):
                        return f"{what} (input {pos}) must be constant, found a runtime tensor"
        # The op's shape rule: omitted inputs, strides, windows, weight shapes, broadcasts,
        # slice ranges. What it refuses stays on the CPU reference, which raises its own
        # error where the model is invalid rather than merely beyond these kernels.
        reason = shape_reason(node, subgraph)
        if reason is not None:
            return reason
        if op == "FULLY_CONNECTED" and node.options.get("weights_format", 0) not in (0, "DEFAULT"):
            return f"weights_format {node.options.weights_format} is not supported"
        if op == "DENSIFY":
            src = tensors[node.inputs[0]]
            if not src.is_constant:
                return "input must be a sparse constant"
            return densify_reason(src)
        if op == "QUANTIZE":
            q = tensors[node.outputs[0]].quantization
            if q is None or q.per_channel:
                return "output must be quantized per tensor"
        return None

    def create_kernel(self) -> GpuKernel:
        return GpuKernel(self.options, __version__)

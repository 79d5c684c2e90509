"""The conformance kit cannot pass a wrong declaration: wrong numbers, refused claims and
unexercised claims fail it, and it runs without pytest."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import offload
from offload import Capabilities, Delegate, DelegateKernel, ModelTypeSupport, OpCapability
from offload.testing import CASES, run_conformance
from offload.testing.__main__ import main

_NO = ModelTypeSupport(support="no", reason="float32 only")
_TYPES = {"float32": ModelTypeSupport(support="yes")} | {
    t: _NO for t in ("float16", "dynamic_range", "int8", "qat")
}
_ACTS = ("NONE", "RELU", "RELU6")


def _caps(*ops: OpCapability) -> Capabilities:
    return Capabilities(ops=ops, model_types=_TYPES)


def _cases(op: str) -> list:
    return [c for c in CASES if c.op == op]


def _same_pads(size: int, stride: int, k: int) -> tuple[int, int, int]:
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + k - size, 0)
    return out, total // 2, total - total // 2


def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, o, swap: bool) -> np.ndarray:
    """NHWC convolution written for these tests; ``swap`` puts the SAME padding's odd extra
    row and column before the input instead of after it."""
    (_, h, wd, _), (co, kh, kw, _) = x.shape, w.shape
    sh, sw = o["stride_h"], o["stride_w"]
    dh, dw = o.get("dilation_h_factor") or 1, o.get("dilation_w_factor") or 1
    ekh, ekw = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    if o["padding"] == "SAME":
        (oh, th, bh), (ow, tw, bw) = _same_pads(h, sh, ekh), _same_pads(wd, sw, ekw)
    else:
        (oh, th, bh), (ow, tw, bw) = ((h - ekh) // sh + 1, 0, 0), ((wd - ekw) // sw + 1, 0, 0)
    if swap:
        th, bh, tw, bw = bh, th, bw, tw
    xp = np.pad(x, ((0, 0), (th, bh), (tw, bw), (0, 0)))
    out = np.zeros((x.shape[0], oh, ow, co), np.float32)
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + (oh - 1) * sh + 1, sh)
            cols = slice(j * dw, j * dw + (ow - 1) * sw + 1, sw)
            out += xp[:, rows, cols, :] @ w[:, i, j, :].T
    if b is not None:
        out += b
    act = o.get("fused_activation_function")
    if act in ("RELU", "RELU6"):
        out = np.clip(out, 0, 6 if act == "RELU6" else None)
    return out


class _ConvKernel(DelegateKernel):
    def __init__(self, swap: bool) -> None:
        self.swap = swap

    def init(self, subgraph: offload.Subgraph, partition: offload.Partition) -> None:
        (n,) = partition.nodes
        self.node = subgraph.nodes[n]
        w_t, b_t = self.node.inputs[1], self.node.inputs[2]
        self.w = subgraph.tensors[w_t].constant_value()
        self.b = subgraph.tensors[b_t].constant_value() if b_t >= 0 else None

    def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [_conv(inputs[0], self.w, self.b, self.node.options, self.swap)]


class _ConvDelegate(Delegate):
    name = "numpy_conv"
    swap = False
    CAPABILITIES = _caps(OpCapability(op="CONV_2D", fused_activations=_ACTS))

    def create_kernel(self) -> DelegateKernel:
        return _ConvKernel(self.swap)


class _SwappedPadConvDelegate(_ConvDelegate):
    name = "swapped_pad_conv"
    swap = True


class _ShyDelegate(Delegate):
    """Declares MAXIMUM, then refuses every node."""

    name = "shy"
    CAPABILITIES = _caps(OpCapability(op="MAXIMUM"))

    def check_node(self, node: offload.Node, subgraph: offload.Subgraph) -> str | None:
        return "this delegate takes nothing after all"


class _NumpyBinaryKernel(DelegateKernel):
    def init(self, subgraph: offload.Subgraph, partition: offload.Partition) -> None:
        (n,) = partition.nodes
        self.func = np.add if subgraph.nodes[n].op == "ADD" else np.subtract

    def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [self.func(*inputs)]


with warnings.catch_warnings():
    # Overriding is_node_supported is deprecated; it still works, and the kit must
    # still catch a delegate that takes more than it declares.
    warnings.simplefilter("ignore", DeprecationWarning)

    class _NarrowDelegate(Delegate):
        """Declares SUB only, yet takes plain ADD too (and computes it right)."""

        name = "narrow"
        CAPABILITIES = _caps(OpCapability(op="SUB", fused_activations=("NONE",)))

        def is_node_supported(self, node: offload.Node, subgraph: offload.Subgraph) -> str | None:
            if node.op == "ADD" and node.options.get("fused_activation_function") in (None, "NONE"):
                shapes = {subgraph.tensors[i].shape for i in node.inputs}
                return None if len(shapes) == 1 else "broadcast"
            return super().is_node_supported(node, subgraph)

        def create_kernel(self) -> DelegateKernel:
            return _NumpyBinaryKernel()


def test_a_correct_numpy_conv_passes_every_conv_case() -> None:
    """A conv computed as TFLite does passes every declared CONV_2D case, strictly."""
    report = run_conformance(_ConvDelegate(), cases=_cases("CONV_2D"))
    assert report.ok(strict=True), report.failures()
    assert report.ops[0].passed >= 7


def test_a_conv_with_pad_before_and_after_swapped_fails_several_cases() -> None:
    """Swapping SAME padding's before and after fails every case whose padding is asymmetric."""
    report = run_conformance(_SwappedPadConvDelegate(), cases=_cases("CONV_2D"))
    failed = {r.case for r in report.results if r.status == "fail"}
    assert {
        "conv_same_stride2_asymmetric",
        "conv_same_even_kernel_batch2",
        "conv_same_strides_h2_w3_batch2",
    } <= failed
    assert not report.ok(strict=False)
    assert report.ops[0].verdict == "fail"


def _hybrid_caps(cap: OpCapability) -> Capabilities:
    partial = ModelTypeSupport(support="partial", reason="float ops of hybrid models")
    return Capabilities(ops=(cap,), model_types=_TYPES | {"dynamic_range": partial})


class _AnyVersionConvDelegate(_ConvDelegate):
    """Says it runs parts of dynamic-range models and takes every CONV_2D version, so hybrid
    nodes too, whose int8 weight codes it then reads as floats."""

    name = "any_version_conv"
    CAPABILITIES = _hybrid_caps(
        OpCapability(op="CONV_2D", versions=(1, 5), fused_activations=_ACTS)
    )


def test_a_float_conv_declaring_hybrid_versions_fails_the_hybrid_case() -> None:
    """A float conv whose versions take dynamic-range nodes fails on their int8 weights; the
    same conv limited by constant_dtypes refuses them and passes."""
    report = run_conformance(_AnyVersionConvDelegate(), cases=_cases("CONV_2D"))
    assert {r.case for r in report.results if r.status == "fail"} == {"conv_2d_hybrid"}
    limited = _AnyVersionConvDelegate()
    cap = OpCapability(
        op="CONV_2D",
        versions=(1, 5),
        fused_activations=_ACTS,
        constant_inputs=(1, 2),
        constant_dtypes=("float32",),
    )
    limited.CAPABILITIES = _hybrid_caps(cap)
    report = run_conformance(limited, cases=_cases("CONV_2D"))
    assert report.ok(strict=True), report.failures()


def test_an_op_refused_on_every_case_fails_under_strict_only() -> None:
    """A declared op the delegate refuses on every case fails strict, with its reason."""
    report = run_conformance(_ShyDelegate(), cases=_cases("MAXIMUM"))
    (op,) = report.ops
    assert op.verdict == "all-refused"
    assert op.refusals == ("this delegate takes nothing after all",)
    assert not report.ok(strict=True)
    assert report.ok(strict=False)


def test_a_declared_op_without_any_case_fails_strict_unless_excluded() -> None:
    """An op declared but exercised by no case fails strict; an op exclusion with a reason
    passes and is reported as excluded."""

    class Gatherer(Delegate):
        name = "gatherer"
        CAPABILITIES = _caps(OpCapability(op="GATHER"))

    report = run_conformance(Gatherer(), cases=_cases("ADD"))
    assert report.ops[0].verdict == "never-exercised"
    assert not report.ok(strict=True)
    excluded = run_conformance(Gatherer(), {"GATHER": "tested in our own suite"}, _cases("ADD"))
    assert excluded.ops[0].verdict == "excluded" and excluded.ok(strict=True)


def test_a_declaration_no_case_falls_inside_is_never_exercised() -> None:
    """Declaring an op only for a dtype no case has is not a pass: never exercised."""

    class Int8Mean(Delegate):
        name = "int8_mean"
        CAPABILITIES = _caps(OpCapability(op="MEAN", dtypes=("int8",)))

    report = run_conformance(Int8Mean(), cases=_cases("MEAN"))
    assert {r.status for r in report.results} == {"not-claimed"}
    assert report.ops[0].verdict == "never-exercised"
    assert "dtype" in report.ops[0].detail


def test_a_too_narrow_declaration_is_noted_but_does_not_fail() -> None:
    """A case taken outside the declaration is judged on its numbers and noted, not failed."""
    report = run_conformance(_NarrowDelegate(), cases=_cases("ADD") + _cases("SUB"))
    add = next(r for r in report.results if r.case == "add")
    assert add.status == "pass" and not add.declared
    assert "declaration rejects" in add.detail
    assert {o.op: o.verdict for o in report.ops} == {"SUB": "ok", "ADD": "undeclared"}
    assert report.ok(strict=True)


def test_a_case_or_op_exclusion_carries_its_reason() -> None:
    """Excluded cases are reported with the reason given, never run."""
    cases = [c for c in _cases("MAXIMUM") if c.name == "maximum"]
    report = run_conformance(_ShyDelegate(), {"maximum": "known bug #12"}, cases)
    assert [(r.status, r.detail) for r in report.results] == [("excluded", "known bug #12")]


def test_dummy_passes_strictly() -> None:
    """Our dummy delegate passes every case it declares, with no unexercised claim."""
    report = run_conformance(offload.load_delegate("dummy"))
    assert report.ok(strict=True), report.failures()
    assert {o.op: o.verdict for o in report.ops} == {"ADD": "ok", "SUB": "ok"}


@pytest.mark.opencl
def test_gpu_opencl_passes_strictly() -> None:
    """gpu_opencl passes every case it takes, and every op it declares is exercised."""
    record = next((d for d in offload.list_delegates() if d.name == "gpu_opencl"), None)
    if record is None or not record.availability.available:
        pytest.skip("gpu_opencl is not installed or has no OpenCL device here")
    report = run_conformance(offload.load_delegate("gpu_opencl"))
    assert report.ok(strict=True), report.failures()


def test_every_case_runs_on_the_cpu_reference() -> None:
    """Case names are unique and every case's declared output shapes are what the CPU gives."""
    from offload.testing import build_case

    assert len({c.name for c in CASES}) == len(CASES)
    for case in CASES:
        content, arrays = build_case(case)
        interp = offload.Interpreter(model_content=content, delegates=[])
        interp.allocate_tensors()
        for detail, value in zip(interp.get_input_details(), arrays):
            interp.set_tensor(detail["index"], value)
        interp.invoke()
        shapes = [tuple(interp.get_tensor(d["index"]).shape) for d in interp.get_output_details()]
        assert shapes == [o.shape for o in case.outputs], case.name


_SHY_FILE = """
import offload
from offload import Capabilities, Delegate, ModelTypeSupport, OpCapability

class Shy(Delegate):
    name = "shy_file"
    CAPABILITIES = Capabilities(
        ops=(OpCapability(op="MAXIMUM"),),
        model_types={t: ModelTypeSupport(support="yes")
                     for t in ("float32", "float16", "dynamic_range", "int8", "qat")},
    )

    def check_node(self, node, subgraph):
        return "refuses everything"

@offload.hookimpl
def offload_register_delegates():
    return [Shy]
"""


def test_the_command_line_fails_an_all_refused_op_only_with_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """python -m offload.testing exits 0 with a warning, and 1 under --strict."""
    path = tmp_path / "shy_delegate.py"
    path.write_text(_SHY_FILE)
    assert main([str(path), "--case", "maximum"]) == 0
    assert "warning: declared but unchecked: MAXIMUM" in capsys.readouterr().out
    assert main([str(path), "--case", "maximum", "--strict"]) == 1
    out = capsys.readouterr().out
    assert "all-refused" in out and "refused: refuses everything" in out


def _without_pytest(code: str) -> subprocess.CompletedProcess[str]:
    prelude = "import sys; sys.modules['pytest'] = None\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_command_line_needs_no_pytest() -> None:
    """The kit's own runner works where pytest cannot be imported."""
    done = _without_pytest(
        "from offload.testing.__main__ import main\nsys.exit(main(['dummy', '--strict']))"
    )
    assert done.returncode == 0, done.stderr
    assert "ADD                ok" in done.stdout


def test_conformance_test_without_pytest_names_the_install_command() -> None:
    """Asking for the pytest helper without pytest says to pip install offload[testing]."""
    done = _without_pytest("from offload.testing import conformance_test")
    assert done.returncode != 0
    assert 'pip install "offload[testing]"' in done.stderr


def _pytest_file(tmp_path: Path, delegate: str) -> subprocess.CompletedProcess[str]:
    test = tmp_path / "test_kit.py"
    test.write_text(
        "from offload.testing import conformance_test\n"
        f"test_conformance = conformance_test({delegate!r})\n"
    )
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )


def test_the_pytest_helper_is_strict_by_default(tmp_path: Path) -> None:
    """conformance_test's declaration item fails for an op refused on every case."""
    path = tmp_path / "shy_delegate.py"
    path.write_text(_SHY_FILE)
    done = _pytest_file(tmp_path, str(path))
    assert done.returncode == 1, done.stdout
    assert "test_conformance[declaration]" in done.stdout
    assert "MAXIMUM: all-refused" in done.stdout


def test_the_pytest_helper_passes_dummy(tmp_path: Path) -> None:
    """conformance_test passes the dummy delegate: its cases pass, the others skip."""
    done = _pytest_file(tmp_path, "dummy")
    assert done.returncode == 0, done.stdout
    assert "1 failed" not in done.stdout and "passed" in done.stdout


class _MilKernel(DelegateKernel):
    """Core ML's conversion, evaluated by its numpy MIL evaluator (no Core ML runtime)."""

    def __init__(self, delegate: Delegate) -> None:
        self.delegate = delegate

    def init(self, subgraph: offload.Subgraph, partition: offload.Partition) -> None:
        from offload_coreml import build_program

        self.partition = partition
        self.converted = build_program(subgraph, partition, self.delegate.options.coreml_version)

    def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        from offload_coreml._mil_eval import evaluate

        c = self.converted
        names = dict(c.inputs)
        feed = {names[t]: x for t, x in zip(self.partition.inputs, inputs) if t in names}
        values = dict(getattr(c, "folded_outputs", {}))  # older converters fold outputs too
        if c.program is not None:
            out = evaluate(c.program, feed)
            values.update({t: out[name] for t, name in c.outputs})
        return [values[t] for t in self.partition.outputs]


def test_coremls_conversion_passes_strictly_on_its_linux_path() -> None:
    """Core ML's declaration and conversion (evaluated in numpy) pass the kit, strictly."""
    coreml = pytest.importorskip("offload_coreml")

    class MilCoreML(coreml.CoreMLDelegate):
        def create_kernel(self) -> DelegateKernel:
            return _MilKernel(self)

    report = run_conformance(MilCoreML({"enabled_devices": "all"}))
    assert report.ok(strict=True), report.failures()

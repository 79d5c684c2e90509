"""`offload diff --per-node` and offload.diff_per_node: real runs, both sides.

Wrong configurations are real delegates loaded from files (LiteRT's external-delegate path),
whose ADD is wrong on purpose; nothing of the tool itself is replaced.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import offload
from offload._cli import main
from offload._per_node import compare_tensors, diff_per_node
from offload._seeded_inputs import input_arrays, random_inputs
from offload.errors import UsageError
from offload.model import ModelBuilder
from offload.tools._per_node_text import format_text

FIXTURES = Path(__file__).parent / "fixtures"

try:
    import ai_edge_litert.interpreter  # noqa: F401

    HAVE_LITERT = True
except ImportError:
    HAVE_LITERT = False
needs_litert = pytest.mark.skipif(not HAVE_LITERT, reason="ai-edge-litert is not installed")
needs_dummy = pytest.mark.skipif(
    "dummy" not in {r.name for r in offload.list_delegates() if r.availability.available},
    reason="the offload-dummy plugin is not installed",
)

# An external delegate whose ADD is ``a + b + OFFSET`` and, with ULPS, then moves the sum
# that many float32 steps up: a delegate author's bug, in a file offload loads by path. It
# takes float ADDs in float32 models and in int8 ones (a hand-built QAT-like graph classifies
# as int8), where the float ops between QUANTIZE and DEQUANTIZE are its to run.
WRONG_ADD = """
import numpy as np
from offload import Capabilities, Delegate, DelegateKernel, ModelTypeSupport, OpCapability

OFFSET = {offset}
ULPS = {ulps}


class Kernel(DelegateKernel):
    def init(self, subgraph, partition):
        self.partition = partition
        self.nodes = [subgraph.nodes[n] for n in partition.nodes]
        self.constants = {{t: subgraph.tensors[t].constant_value() for t in partition.constants}}

    def invoke(self, inputs):
        values = dict(self.constants)
        values.update(zip(self.partition.inputs, inputs))
        for node in self.nodes:
            a, b = node.inputs
            out = values[a] + values[b] + np.float32(OFFSET)
            for _ in range(ULPS):
                out = np.nextafter(out, np.float32(np.inf))
            values[node.outputs[0]] = out
        return [values[t] for t in self.partition.outputs]


class WrongAdd(Delegate):
    name = "{name}"
    CAPABILITIES = Capabilities(
        ops=(OpCapability(op="ADD", fused_activations=("NONE",)),),
        model_types={{
            t: ModelTypeSupport(support="partial" if t in ("float32", "int8") else "no")
            for t in ("float32", "float16", "dynamic_range", "int8", "qat")
        }},
    )

    def create_kernel(self):
        return Kernel()
"""


def wrong_add(tmp_path: Path, name: str, offset: float = 0.0, ulps: int = 0) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(WRONG_ADD.format(name=name, offset=offset, ulps=ulps))
    return str(path)


def chain(tmp_path: Path, constant: float = 1.0) -> str:
    """x -> ADD(c) -> y -> MUL(y, y) -> z -> SUB(z, x) -> w: three nodes, one output each."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 64))
    c = b.add_constant("c", np.full((1, 64), constant, np.float32))
    y, z, w = (b.add_tensor(n, (1, 64)) for n in "yzw")
    b.add_operator("ADD", [x, c], [y])
    b.add_operator("MUL", [y, y], [z])
    b.add_operator("SUB", [z, x], [w])
    b.add_output(w)
    path = tmp_path / "chain.tflite"
    b.save(path)
    return str(path)


def cancelling(tmp_path: Path) -> str:
    """x -> ADD(c) -> y -> SUB(y, x) -> d with c tiny: SUB cancels y's leading digits, so
    one float32 step of error in y becomes a large relative error in d."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 256))
    c = b.add_constant("c", np.full((1, 256), 1e-4, np.float32))
    y, d = b.add_tensor("y", (1, 256)), b.add_tensor("d", (1, 256))
    b.add_operator("ADD", [x, c], [y])
    b.add_operator("SUB", [y, x], [d])
    b.add_output(d)
    path = tmp_path / "cancelling.tflite"
    b.save(path)
    return str(path)


def fake_quant(tmp_path: Path) -> str:
    """A QAT-like graph: x -> MUL(x, 0) -> z -> ADD(z, c) -> y -> QUANTIZE -> q (int8, scale
    1/128) -> DEQUANTIZE -> out. MUL makes z a signed zero, so y is exactly c, whose 64
    values step one float32 ulp at a time across the rounding boundary 0.5/128 between codes
    0 and 1: moving y up one ulp flips exactly one code, whatever the tie rule."""
    boundary = np.array(0.5 / 128, np.float32).view(np.int32)
    c_values = (boundary + np.arange(-32, 32, dtype=np.int32)).view(np.float32)
    b = ModelBuilder()
    x = b.add_input("x", (1, 64))
    zero = b.add_constant("zero", np.zeros((1, 64), np.float32))
    c = b.add_constant("c", c_values.reshape(1, 64))
    z, y = b.add_tensor("z", (1, 64)), b.add_tensor("y", (1, 64))
    q = b.add_tensor("q", (1, 64), np.int8, quantization=(1 / 128, 0))
    out = b.add_tensor("out", (1, 64))
    b.add_operator("MUL", [x, zero], [z])
    b.add_operator("ADD", [z, c], [y])
    b.add_operator("QUANTIZE", [y], [q])
    b.add_operator("DEQUANTIZE", [q], [out])
    b.add_output(out)
    path = tmp_path / "fake_quant.tflite"
    b.save(path)
    return str(path)


def output_count(path: Path | str) -> int:
    return sum(t >= 0 for n in offload.load_model(path).main.nodes for t in n.outputs)


# -- agreement on real models ---------------------------------------------------------------


@needs_litert
@pytest.mark.litert
@pytest.mark.parametrize(
    "fixture",
    [
        "mobilenet_v2_int8",
        "mobilenet_v2_float32",
        "mobilenet_v2_float16",
        "inception_v3_mini_int8",
        "inception_v3_mini_dynamic_range",
        "lstm_float32",
    ],
)
def test_committed_fixtures_agree_with_litert(fixture: str) -> None:
    """The CPU reference agrees with LiteRT at every node of these fixtures (0 steps, 1e-5)."""
    path = FIXTURES / f"{fixture}.tflite"
    result = diff_per_node(path)
    assert (result.reference, result.candidate) == ("litert", "cpu")
    assert len(result.rows) == output_count(path)
    bad = [(r.node, r.op, r.status, r.comparison) for r in result.rows if r.status != "agree"]
    assert not bad
    assert result.first_divergence is None and not result.diverged


@pytest.mark.parametrize("kind", ["normal", "uniform", "image", "wide"])
@pytest.mark.parametrize("fixture", ["mobilenet_v2_int8", "mobilenet_v3_small_float32"])
def test_both_configurations_see_the_same_inputs(fixture: str, kind: str) -> None:
    """cpu against cpu is bit-identical at every node for every input kind."""
    result = diff_per_node(FIXTURES / f"{fixture}.tflite", "cpu", "cpu", seed=3, input_kind=kind)
    assert result.rows and all(r.status == "agree" for r in result.rows)
    assert all(r.comparison is not None and r.comparison.equal == 1.0 for r in result.rows)


# -- a wrong configuration is caught and localised ------------------------------------------


def test_wrong_delegate_as_reference_is_localised_to_its_node(tmp_path: Path) -> None:
    """ADD off by 0.5: ADD diverges and is local; MUL and SUB only inherit it."""
    model = chain(tmp_path)
    result = diff_per_node(model, reference=wrong_add(tmp_path, "off_by_half", 0.5))
    assert [(r.node, r.status, r.locality) for r in result.rows] == [
        (0, "diverged", "local"),
        (1, "diverged", "inherited"),
        (2, "diverged", "inherited"),
    ]
    first, first_local = result.first_divergence, result.first_local_divergence
    assert first is not None and first_local is not None
    assert first.node == first_local.node == 0 and first.op == "ADD v1"
    assert first.comparison is not None and first.comparison.max_error == pytest.approx(0.5)
    assert first.local is not None and first.local.exceeds
    assert result.rows[1].local is not None and result.rows[1].local.equal == 1.0


def test_first_divergence_can_be_inherited(tmp_path: Path) -> None:
    """ADD one float32 step off stays under 1e-5, but SUB cancels it into a large relative
    error: SUB is the first divergence, inherited, and no node is a local divergence."""
    model = cancelling(tmp_path)
    result = diff_per_node(model, reference=wrong_add(tmp_path, "one_ulp", ulps=1))
    add, sub = result.rows
    assert add.status == "agree" and add.comparison is not None
    assert 0 < add.comparison.relative_error < 1e-5
    assert sub.status == "diverged" and sub.locality == "inherited"
    assert result.first_divergence is sub and result.first_local_divergence is None
    text = format_text(result)
    assert "first divergence: node 1 SUB v1" in text and "first local divergence: none" in text


@pytest.mark.parametrize("wrong_side", ["reference", "candidate"])
def test_a_last_bit_float_difference_that_flips_a_quantize_is_named(
    tmp_path: Path, wrong_side: str
) -> None:
    """ADD one ulp off is far under the float tolerance, but QUANTIZE turns it into a whole
    step: QUANTIZE is the first divergence and not local (inherited against the CPU
    candidate, n/a against the delegate), and ADD is named as the first float tensor that
    is not bit-identical; MUL before it, bit-identical, is not."""
    model, wrong = fake_quant(tmp_path), wrong_add(tmp_path, "one_ulp", ulps=1)
    configs = {"reference": "cpu", "candidate": "cpu", wrong_side: wrong}
    result = diff_per_node(model, configs["reference"], configs["candidate"])
    mul, add, quantize, dequantize = result.rows
    assert mul.status == add.status == "agree" and quantize.status == "diverged"
    assert mul.comparison is not None and mul.comparison.equal == 1.0
    first = result.first_divergence
    assert first is quantize and first.comparison is not None
    assert (first.comparison.kind, first.comparison.max_error) == ("integer", 1)
    assert first.locality == ("inherited" if wrong_side == "reference" else "n/a")
    assert result.first_local_divergence is None

    culprit = result.first_inexact_float
    assert culprit is add and (culprit.node, culprit.op, culprit.name) == (1, "ADD v1", "y")
    assert culprit.comparison is not None and culprit.comparison.equal == 0.0
    assert 0 < culprit.comparison.relative_error < 1e-6

    text = format_text(result)
    assert (
        f"first float tensor not bit-identical: node 1 ADD v1, tensor {add.tensor} 'y' "
        "[1x64 float32]: max |diff| 4.66e-10 (rel 1.19e-07), 64 of 64 values differ"
    ) in text
    data = json.loads(result.to_json())
    assert (data["first_inexact_float"]["node"], data["first_inexact_float"]["name"]) == (1, "y")


@needs_litert
@pytest.mark.litert
def test_litert_last_bit_tanh_difference_is_named(tmp_path: Path) -> None:
    """The issue's case against LiteRT itself: float TANH differs from LiteRT's in the last
    bit (under the tolerance), and an int16 QUANTIZE behind it (a step near a float32 ulp)
    flips codes: the inherited QUANTIZE is the first divergence, and TANH is named."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 4096))
    y = b.add_tensor("y", (1, 4096))
    q = b.add_tensor("q", (1, 4096), np.int16, quantization=(1 / 32768, 0))
    out = b.add_tensor("out", (1, 4096))
    b.add_operator("TANH", [x], [y])
    b.add_operator("QUANTIZE", [y], [q])
    b.add_operator("DEQUANTIZE", [q], [out])
    b.add_output(out)
    b.save(tmp_path / "tanh_quantize.tflite")
    result = diff_per_node(tmp_path / "tanh_quantize.tflite", seed=2)
    tanh = result.rows[0]
    assert tanh.status == "agree" and tanh.comparison is not None
    if tanh.comparison.equal == 1.0:
        pytest.skip("the CPU reference's TANH is now bit-identical with LiteRT's here")
    first = result.first_divergence
    assert first is not None and (first.op, first.locality) == ("QUANTIZE v1", "inherited")
    assert result.first_local_divergence is None
    assert result.first_inexact_float is tanh
    assert "first float tensor not bit-identical: node 0 TANH v1, tensor 1 'y'" in format_text(
        result
    )


def test_no_inexact_float_is_named_when_floats_are_bit_identical(tmp_path: Path) -> None:
    """None when nothing diverges, and when the first divergence is local (its own node is
    to blame, whatever came before)."""
    agreeing = diff_per_node(fake_quant(tmp_path), "cpu", "cpu")
    assert not agreeing.diverged and agreeing.first_inexact_float is None
    assert json.loads(agreeing.to_json())["first_inexact_float"] is None
    local = diff_per_node(chain(tmp_path), reference=wrong_add(tmp_path, "off_by_half", 0.5))
    first = local.first_divergence
    assert first is not None and first.locality == "local"
    assert local.first_inexact_float is None
    assert "first float tensor not bit-identical" not in format_text(local)


def test_inherited_divergence_with_bit_identical_floats_says_none(tmp_path: Path) -> None:
    """An inherited divergence with no inexact float before it says so: "none", and why."""
    model = cancelling(tmp_path)
    result = diff_per_node(model, reference=wrong_add(tmp_path, "one_ulp", ulps=1))
    # Drop ADD's row: what is left is an inherited SUB with no float difference before it.
    trimmed = replace(result, rows=result.rows[1:])
    assert trimmed.first_divergence is not None and trimmed.first_inexact_float is None
    assert (
        "first float tensor not bit-identical: none (every observable float tensor before it "
        "is bit-identical)"
    ) in format_text(trimmed)
    assert result.first_inexact_float is result.rows[0]  # the untrimmed result names ADD


def test_wrong_delegate_as_candidate_is_the_first_divergence(tmp_path: Path) -> None:
    """Against a delegate candidate the first divergence is found; locality is n/a."""
    model = chain(tmp_path)
    result = diff_per_node(model, "cpu", wrong_add(tmp_path, "off_by_half", 0.5))
    first = result.first_divergence
    assert first is not None and first.node == 0 and first.locality == "n/a"
    assert result.first_local_divergence is None and not result.locality_checked
    assert result.delegation["candidate"]["delegates"]["off_by_half"]["nodes"] == 1
    assert "re-run only when it is 'cpu'" in format_text(result)


@needs_dummy
def test_nodes_inside_a_partition_are_hidden_not_agreeing(tmp_path: Path) -> None:
    """dummy runs ADD -> SUB as one partition: ADD's output is listed as inside it."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 8))
    c = b.add_constant("c", np.full((1, 8), 2.0, np.float32))
    y, w, z = (b.add_tensor(n, (1, 8)) for n in "ywz")
    b.add_operator("ADD", [x, c], [y])
    b.add_operator("SUB", [y, x], [w])
    b.add_operator("MUL", [w, w], [z])
    b.add_output(z)
    b.save(tmp_path / "m.tflite")
    result = diff_per_node(tmp_path / "m.tflite", "cpu", "dummy", check_locality="all")
    assert [r.status for r in result.rows] == ["hidden", "agree", "agree"]
    assert result.rows[0].note == "dummy: inside dummy partition 0"
    assert result.rows[0].comparison is None and not result.diverged
    assert "1 inside a delegate partition" in format_text(result)


def test_a_failed_run_is_reported_at_its_node(tmp_path: Path) -> None:
    """GATHER with indices out of range stops the run: that node is 'failed', exit 1."""
    b = ModelBuilder()
    x = b.add_input("x", (2, 3))
    idx = b.add_input("idx", (4,), np.int32)
    y, z = b.add_tensor("y", (2, 3)), b.add_tensor("z", (4, 3))
    b.add_operator("RELU", [x], [y])
    b.add_operator("GATHER", [y, idx], [z], {"axis": 0})
    b.add_output(z)
    b.save(tmp_path / "g.tflite")
    result = diff_per_node(tmp_path / "g.tflite", "cpu", "cpu", seed=1)
    assert [r.status for r in result.rows] == ["agree", "failed"]
    assert "GATHER" in result.errors["reference"] and result.diverged
    assert main(["diff", "--graph", str(tmp_path / "g.tflite"), "--per-node",
                 "--reference", "cpu"]) == 1  # fmt: skip


# -- comparisons and inputs -----------------------------------------------------------------


def test_integer_tolerance_is_in_steps() -> None:
    """Integers diverge past tolerance_steps (0: bit-exact); max error is in steps."""
    a = np.array([[-128, 0, 5, 127]], np.int8)
    b = np.array([[-127, 0, 5, 127]], np.int8)
    exact = compare_tensors(a, b, 1e-5, 0)
    assert (exact.kind, exact.max_error, exact.equal, exact.exceeds) == ("integer", 1, 0.75, True)
    assert not compare_tensors(a, b, 1e-5, 1).exceeds


def test_float_tolerance_is_relative_to_the_reference() -> None:
    """Floats: max abs error over max |reference|; NaN matching NaN is no error."""
    ref = np.array([1000.0, -2.0, np.nan], np.float32)
    cand = np.array([1000.0, -2.001, np.nan], np.float32)
    cmp = compare_tensors(ref, cand, 1e-5, 0)
    assert cmp.max_error == pytest.approx(0.001, rel=1e-3)
    assert cmp.relative_error == pytest.approx(1e-6, rel=1e-3)
    assert not cmp.exceeds and cmp.equal == pytest.approx(2 / 3)
    assert compare_tensors(ref, cand, 1e-7, 0).exceeds
    assert compare_tensors(ref, ref[:2], 1, 0).note == "shape 2, reference 3"
    assert compare_tensors(ref, np.array([1, 2, 3], np.float16), 1, 0).exceeds


def test_input_kinds_draw_what_they_say() -> None:
    """normal is random_inputs' draw; image is in [0, 1); int8 inputs are that draw quantized."""
    details = [
        {"name": "f", "shape": (4096,), "dtype": np.float32, "quantization": (0.0, 0)},
        {"name": "q", "shape": (4096,), "dtype": np.int8, "quantization": (1 / 128, -1)},
    ]
    same = random_inputs(details, np.random.default_rng(5))
    for a, b in zip(input_arrays(details, np.random.default_rng(5), "normal"), same):
        np.testing.assert_array_equal(a, b)
    f, q = input_arrays(details, np.random.default_rng(5), "image")
    assert f.min() >= 0 and f.max() < 1 and q.min() >= -1 and q.max() <= 127
    rng = np.random.default_rng(5)
    rng.random(4096)  # f's draw comes first
    draw = rng.random(4096)
    np.testing.assert_array_equal(q, np.clip(np.round(draw * 128) - 1, -128, 127))
    f, q = input_arrays(details, np.random.default_rng(5), "wide")
    assert 80 < f.std() < 120 and (q == 127).mean() > 0.4  # clipped, not wrapped
    f, _ = input_arrays(details, np.random.default_rng(5), "uniform")
    assert f.min() >= -1 and f.max() <= 1 and f.min() < -0.9


def test_missing_litert_names_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without ai-edge-litert, 'litert' is a typed error saying how to install it; exit 2."""
    monkeypatch.setitem(sys.modules, "ai_edge_litert.interpreter", None)  # import fails
    model = chain(tmp_path)
    with pytest.raises(UsageError, match="pip install ai-edge-litert"):
        diff_per_node(model)
    assert main(["diff", "--graph", model, "--per-node"]) == 2
    assert "pip install ai-edge-litert" in capsys.readouterr().err
    assert not diff_per_node(model, "cpu", "cpu").diverged  # the rest still works


# -- the command line -----------------------------------------------------------------------


def test_cli_json_names_the_first_local_divergence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--json: one document with the verdicts and every row; exit 1 on divergence."""
    model, wrong = chain(tmp_path), wrong_add(tmp_path, "off_by_half", 0.5)
    argv = ["diff", "--graph", model, "--per-node", "--reference", wrong, "--json"]
    assert main(argv) == 1
    data = json.loads(capsys.readouterr().out)
    assert (data["reference"], data["candidate"], data["diverged"]) == ("off_by_half", "cpu", True)
    assert data["first_local_divergence"]["node"] == 0
    assert data["first_local_divergence"]["comparison"]["max_error"] == pytest.approx(0.5)
    assert [r["locality"] for r in data["rows"]] == ["local", "inherited", "inherited"]
    assert data["summary"]["diverged"] == 3 and data["tolerance_steps"] == 0


def test_cli_delegate_flags_select_the_candidate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--external_delegate_path makes that delegate the candidate; --tolerance loosens."""
    model, wrong = chain(tmp_path), wrong_add(tmp_path, "off_by_half", 0.5)
    base = ["diff", "--graph", model, "--per-node", "--reference", "cpu"]
    assert main([*base, "--external_delegate_path", wrong]) == 1
    out = capsys.readouterr().out
    assert "candidate: off_by_half" in out and "first divergence: node 0 ADD v1" in out
    assert main([*base, "--candidate", wrong, "--tolerance", "1"]) == 0
    assert "first divergence: none" in capsys.readouterr().out


@needs_litert
def test_cli_all_lists_every_node_and_exits_0_when_agreeing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without divergence: exit 0, no table unless --all, which lists every node."""
    path = str(FIXTURES / "mobilenet_v2_int8.tflite")
    assert main(["diff", "--graph", path, "--per-node"]) == 0
    out = capsys.readouterr().out
    assert "first divergence: none" in out and "verdict" not in out
    assert main(["diff", "--graph", path, "--per-node", "--all", "--input", "image"]) == 0
    table = capsys.readouterr().out.split("----\n", 1)[1].splitlines()
    assert len(table) == output_count(path) and all(ln.rstrip().endswith("agree") for ln in table)


@pytest.mark.parametrize(
    "extra",
    [
        ["--tolerance", "0.1"],  # a --per-node flag without --per-node
        ["--per-node", "--candidate", "cpu", "--use_dummy_delegate"],  # two candidates
        ["--per-node", "--max_avg_error", "1"],  # the output diff's threshold
        ["--per-node", "--tolerance", "-1", "--reference", "cpu"],
        ["--per-node", "--input", "bogus"],
    ],
)
def test_cli_usage_errors_exit_2(
    extra: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["diff", "--graph", chain(tmp_path), *extra]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_python_m_offload_diff_per_node(tmp_path: Path) -> None:
    """`python -m offload diff --per-node` as a process: the report on stdout, exit 1."""
    model, wrong = chain(tmp_path), wrong_add(tmp_path, "off_by_half", 0.5)
    proc = subprocess.run(
        [sys.executable, "-m", "offload", "diff", "--graph", model, "--per-node",
         "--reference", wrong],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "first local divergence: node 0 ADD v1" in proc.stdout

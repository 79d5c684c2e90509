"""Every code block in docs/ runs, so the examples a delegate author copies stay true.

- ``python`` blocks run in order, one namespace per document (a later block uses what an
  earlier one defined), in a directory holding ``model.tflite`` (a committed fixture).
  A ``<!-- docs-test: ... -->`` line just before a block adds to it: ``setup=NAME`` puts what
  the block's prose assumes (a node, a partition, options) in the namespace first,
  ``check=NAME`` then checks what the block made (an int8 example against the CPU
  reference's own output, say), ``needs=MODULE`` skips it where MODULE is not installed.
- ``sh`` blocks: every ``offload`` / ``python -m offload.testing`` command parses with the real
  command line (flags that exist, values they take); ``<!-- docs-test: synopsis -->`` marks a
  usage synopsis instead.
- ``toml`` blocks parse; any other block must say what it is (``<!-- docs-test: output -->``
  for sample output).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shlex
import shutil
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import offload
from offload import quant
from tests._models import FIXTURES

DOCS = Path(__file__).resolve().parents[1] / "docs"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_MARKER = re.compile(r"<!-- docs-test: (.*?) -->\s*$")


@dataclass
class Block:
    doc: str
    line: int
    lang: str
    code: str
    marks: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.doc}:{self.line}"


def blocks(path: Path) -> list[Block]:
    text = path.read_text()
    found = []
    for m in _FENCE.finditer(text):
        line = text[: m.start()].count("\n") + 1
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marks: dict[str, str] = {}
        marker = _MARKER.match(before.strip())
        if marker:
            for item in marker.group(1).split(","):
                key, _, value = item.strip().partition("=")
                marks[key] = value
        found.append(Block(path.name, line, m.group(1), m.group(2), marks))
    return found


DOCUMENTS = sorted(DOCS.glob("*.md"))


# -- what the prose assumes ------------------------------------------------------------------


def _int8_nodes(ns: dict[str, Any]) -> None:
    """``subgraph`` of an int8 MobileNetV2, a 1x1 ``conv`` with its int32 ``acc`` and an
    ``add`` with its input arrays ``a`` and ``b``, from a run of the CPU reference."""
    path = FIXTURES / "mobilenet_v2_int8.tflite"
    it = offload.Interpreter(
        model_path=str(path), delegates=[], experimental_preserve_all_tensors=True
    )
    it.allocate_tensors()
    detail = it.get_input_details()[0]
    rng = np.random.default_rng(0)
    it.set_tensor(detail["index"], rng.integers(-128, 128, detail["shape"], dtype=np.int8))
    it.invoke()
    sg = it.model.main
    conv = next(
        n for n in sg.nodes if n.op == "CONV_2D" and sg.tensors[n.inputs[1]].shape[1:3] == (1, 1)
    )
    add = next(n for n in sg.nodes if n.op == "ADD")
    x_t, w_t, b_t = (sg.tensors[i] for i in conv.inputs[:3])
    x = it.get_tensor(conv.inputs[0]).astype(np.int64) - quant.scale_zero_point(x_t)[1]
    w = w_t.constant_value().astype(np.int64)[:, 0, 0, :]
    acc = np.einsum("nhwc,oc->nhwo", x, w) + b_t.constant_value().astype(np.int64)
    ns.update(
        subgraph=sg,
        conv=conv,
        add=add,
        acc=acc.astype(np.int32),
        a=it.get_tensor(add.inputs[0]),
        b=it.get_tensor(add.inputs[1]),
        _expected={
            "conv_out": it.get_tensor(conv.outputs[0]),
            "add_out": it.get_tensor(add.outputs[0]),
        },
    )


def _int8_boundary(ns: dict[str, Any]) -> None:
    model = offload.load_model(FIXTURES / "small_cnn_int8.tflite")
    sg = model.main
    quantize = next(n for n in sg.nodes if n.op == "QUANTIZE")
    ns.update(
        in_tensor=sg.tensors[quantize.outputs[0]],
        out_tensor=sg.tensors[quantize.outputs[0]],
        int8_input=np.arange(-128, 128, dtype=np.int8),
        float_result=np.linspace(-1, 1, 16, dtype=np.float32),
    )


def _partition(ns: dict[str, Any]) -> None:
    """A partition as ``DelegateKernel.init`` receives it (the dummy delegate's ADD), and a
    delegate's options."""
    with pytest.warns(offload.errors.PartitionCostWarning):
        it = offload.Interpreter(
            model_path=str(FIXTURES / "small_cnn_float32.tflite"), delegates=["dummy"]
        )
        plan = it.plan()
    ns.update(
        subgraph=plan.subgraph,
        partition=plan.partitions[0],
        options=type("Options", (), {"cache_dir": str(ns["_tmp"] / "cache")})(),
        device_name="CPU",
        __version__="0.1.0",
        compile_program=lambda: b"\x00program",
    )


def _my_options(ns: dict[str, Any]) -> None:
    class MyOptions(offload.DelegateOptions):
        precision: str = "float32"

    ns["MyOptions"] = MyOptions


def _my_delegate(ns: dict[str, Any]) -> None:
    _my_options(ns)

    class MyDelegate(offload.Delegate):
        name = "mine"
        Options = ns["MyOptions"]
        CAPABILITIES = offload.Capabilities(
            ops=(offload.OpCapability(op="ADD"),),
            model_types={
                t: offload.ModelTypeSupport(support="yes")
                for t in ("float32", "float16", "dynamic_range", "int8", "qat")
            },
        )

    ns["MyDelegate"] = MyDelegate


def _sweep_data(ns: dict[str, Any]) -> None:
    """Two small classifiers, a folder of eight images and their labels."""
    pytest.importorskip("PIL", reason="pillow reads the images")
    from PIL import Image

    tmp: Path = ns["_tmp"]
    shutil.copy(FIXTURES / "mobilenet_v2_float32.tflite", tmp / "a.tflite")
    shutil.copy(FIXTURES / "mobilenet_v2_int8.tflite", tmp / "b_int8.tflite")
    (tmp / "val").mkdir()
    rng = np.random.default_rng(0)
    for i in range(8):
        pixels = rng.integers(0, 256, (80, 80, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(tmp / "val" / f"img{i}.png")
    (tmp / "val.txt").write_text("".join(f"{i % 10}\n" for i in range(8)))


SETUPS: dict[str, Callable[[dict[str, Any]], None]] = {
    "int8_nodes": _int8_nodes,
    "int8_boundary": _int8_boundary,
    "partition": _partition,
    "my_options": _my_options,
    "my_delegate": _my_delegate,
    "sweep_data": _sweep_data,
}


# -- what the blocks must have made ----------------------------------------------------------


def _check_int8_nodes(ns: dict[str, Any]) -> None:
    """The documented rules give the CPU reference's own outputs, bit for bit."""
    for name, want in ns["_expected"].items():
        if name in ns:
            np.testing.assert_array_equal(ns[name].reshape(want.shape), want, err_msg=name)


def _check_profiling_kernel(ns: dict[str, Any]) -> None:
    kernel = ns["MyKernel"]()
    assert kernel.set_profiling(True) is True
    profile = kernel.profile()
    assert profile.kernels[0].flops == 9_000_000


def _check_provider(ns: dict[str, Any]) -> None:
    flags = {f.flag: f for f in ns["provider"].flags}
    assert flags["--mine_precision"].option == "precision"
    assert flags["--mine_max_delegated_partitions"].type == "int"


def _check_engine_delegate(ns: dict[str, Any]) -> None:
    interp = ns["interp"]
    interp.allocate_tensors()
    assert interp.delegation_report()["delegates"]["my_engine"]["nodes"]


CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "int8_nodes": _check_int8_nodes,
    "profiling_kernel": _check_profiling_kernel,
    "provider": _check_provider,
    "engine_delegate": _check_engine_delegate,
}


# -- the runs --------------------------------------------------------------------------------


@contextlib.contextmanager
def _in(directory: Path) -> Iterator[None]:
    with contextlib.chdir(directory), contextlib.redirect_stdout(io.StringIO()):
        yield


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: p.name)
def test_python_blocks_run(doc: Path, tmp_path: Path):
    shutil.copy(FIXTURES / "small_cnn_float32.tflite", tmp_path / "model.tflite")
    ns: dict[str, Any] = {"offload": offload, "np": np, "_tmp": tmp_path, "__name__": "docs"}
    ran = 0
    for block in blocks(doc):
        if block.lang != "python":
            continue
        needs = block.marks.get("needs")
        if needs and importlib.util.find_spec(needs) is None:
            continue
        with _in(tmp_path):
            if "setup" in block.marks:
                SETUPS[block.marks["setup"]](ns)
            try:
                exec(compile(block.code, block.label, "exec"), ns)  # noqa: S102
            except Exception as exc:
                pytest.fail(f"{block.label}: {type(exc).__name__}: {exc}")
            if "check" in block.marks:
                CHECKS[block.marks["check"]](ns)
        ran += 1
    assert ran or not any(b.lang == "python" for b in blocks(doc))


def _commands(code: str) -> Iterator[list[str]]:
    for line in code.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if ">" in words:
            words = words[: words.index(">")]
        if words:
            yield words


def _parse(words: list[str]) -> None:
    from offload._cli import build_parser
    from offload.testing.__main__ import build_parser as kit_parser

    if words[:3] == ["python", "-m", "offload.testing"]:
        kit_parser().parse_args(words[3:])
    elif words[0] == "offload":
        build_parser().parse_args(words[1:])
    elif words[0] not in ("pip", "make"):
        raise AssertionError(f"not a command the docs test knows: {shlex.join(words)}")


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: p.name)
def test_other_blocks_are_valid(doc: Path):
    for block in blocks(doc):
        if block.lang == "python":
            continue
        if block.lang == "toml":
            tomllib.loads(block.code)
        elif block.lang == "sh" and "synopsis" not in block.marks:
            for words in _commands(block.code):
                try:
                    with contextlib.redirect_stderr(io.StringIO()) as err:
                        _parse(words)
                except SystemExit:
                    pytest.fail(f"{block.label}: {shlex.join(words)}: {err.getvalue().strip()}")
        elif block.lang not in ("sh",) and "output" not in block.marks:
            pytest.fail(
                f"{block.label}: a ```{block.lang} block; mark it (docs-test: output) or give "
                "it a language the test runs"
            )


def test_markers_name_what_exists():
    for doc in DOCUMENTS:
        for block in blocks(doc):
            assert block.marks.get("setup", "") in {"", *SETUPS}, block.label
            assert block.marks.get("check", "") in {"", *CHECKS}, block.label

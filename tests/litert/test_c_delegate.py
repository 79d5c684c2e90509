"""A LiteRT C delegate library, compiled here from add_sub_delegate.c with the system C
compiler, reaches LiteRT through the litert delegate: load_delegate("x.so", options) and
--external_delegate_path route it there, LiteRT applies it to the partitions offload hands
over (its Prepare runs, it claims ADD and SUB and runs them), and the numbers are LiteRT's
with the same library loaded directly. Options the library refuses are typed errors. As in
LiteRT, load_delegate makes one instance of the C delegate, shared by every interpreter and
partition it is given and destroyed once, when the last of them lets go."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from ai_edge_litert import interpreter as litert

import offload
from offload._cli import main as cli_main
from offload.errors import DelegateError, DelegateOptionsError, IncompatibleOptionError
from offload.model import ModelBuilder

from ._support import assert_identical, run

SOURCE = Path(__file__).with_name("add_sub_delegate.c")
COUNTERS = ("prepare_calls", "claimed_nodes", "invoke_calls")
# The life of the library's delegate instances: made, destroyed, options parsed (one a key).
LIFE = ("delegates_created", "delegates_destroyed", "options_parsed")


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = os.environ.get("CC") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler: gcc is not on PATH (set CC to use another)")
    out = tmp_path_factory.mktemp("c_delegate") / "libadd_sub_delegate.so"
    built = subprocess.run(
        [compiler, "-O2", "-Wall", "-Wextra", "-shared", "-fPIC", "-o", str(out), str(SOURCE)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, f"{compiler} failed:\n{built.stderr}"
    return out


class Counters:
    """The library's exported counters, through the handle LiteRT's ctypes load shares."""

    def __init__(self, path: Path) -> None:
        self.lib = ctypes.CDLL(str(path))

    def reset(self) -> None:
        for name in (*COUNTERS, *LIFE):
            ctypes.c_int.in_dll(self.lib, f"offload_test_{name}").value = 0

    def read(self) -> dict[str, int]:
        return {n: ctypes.c_int.in_dll(self.lib, f"offload_test_{n}").value for n in COUNTERS}

    def life(self) -> tuple[int, int, int]:
        """(instances created, destroyed, options parsed) since the last reset."""
        created, destroyed, parsed = (
            ctypes.c_int.in_dll(self.lib, f"offload_test_{n}").value for n in LIFE
        )
        return created, destroyed, parsed


@pytest.fixture
def counters(library: Path) -> Counters:
    found = Counters(library)
    # Instances earlier tests left to the garbage collector go now, not while a test counts.
    gc.collect()
    found.reset()
    return found


def _model() -> bytes:
    """x -> ADD c -> SUB x -> MUL c -> ADD(RELU) -> y: two nodes the C delegate claims (ADD
    and SUB without an activation), two it leaves to LiteRT."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(2, 3))
    c = b.add_constant("c", np.arange(6, dtype=np.float32).reshape(2, 3) - 2)
    t1, t2, t3, y = (b.add_tensor(n, shape=(2, 3)) for n in ("t1", "t2", "t3", "y"))
    b.add_operator("ADD", [x, c], [t1])
    b.add_operator("SUB", [t1, x], [t2])
    b.add_operator("MUL", [t2, c], [t3])
    b.add_operator("ADD", [t3, t2], [y], {"fused_activation_function": "RELU"})
    b.add_output(y)
    return b.build()


X = np.array([[0.5, -1.5, 2.0], [3.25, -0.75, 1.0]], np.float32)


def _litert_with(library: Path, options: dict[str, str]) -> list[np.ndarray]:
    interp = litert.Interpreter(
        model_content=_model(),
        experimental_delegates=[litert.load_delegate(str(library), options)],
    )
    interp.allocate_tensors()
    return run(interp, [X])


def test_library_is_applied_to_the_partition_and_gives_litert_numbers(
    library: Path, counters: Counters
) -> None:
    """load_delegate('x.so', options) gives the litert delegate; LiteRT prepares the C
    delegate on the exported partition, which claims ADD and SUB and runs them."""
    delegate = offload.load_delegate(str(library), {"claim": "add_sub"})
    assert delegate.name == "litert"
    assert delegate.options.external_delegate_path == str(library)
    interp = offload.Interpreter(model_content=_model(), experimental_delegates=[delegate])
    interp.allocate_tensors()
    got = run(interp, [X])
    seen = counters.read()
    assert seen["prepare_calls"] >= 1 and seen["claimed_nodes"] == 2
    assert seen["invoke_calls"] == 1
    assert [p.delegate for p in interp.plan().partitions] == ["litert"]
    (row,) = interp.delegate_kernel_stats()
    assert row["stats"]["external_delegate"] == str(library)
    counters.reset()
    assert_identical(got, _litert_with(library, {"claim": "add_sub"}), "C delegate")
    assert counters.read()["claimed_nodes"] == 2


def _longer_model() -> bytes:
    """x -> ADD c -> SUB x -> MUL c -> SUB c -> MUL c -> y."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(2, 3))
    c = b.add_constant("c", np.arange(6, dtype=np.float32).reshape(2, 3) - 2)
    t = [b.add_tensor(f"t{k}", shape=(2, 3)) for k in range(5)]
    b.add_operator("ADD", [x, c], [t[0]])
    b.add_operator("SUB", [t[0], x], [t[1]])
    b.add_operator("MUL", [t[1], c], [t[2]])
    b.add_operator("SUB", [t[2], c], [t[3]])
    b.add_operator("MUL", [t[3], c], [t[4]])
    b.add_output(t[4])
    return b.build()


def test_library_sees_only_the_partition_it_is_handed(library: Path, counters: Counters) -> None:
    """dummy (partitions of two nodes or more) takes the first ADD and SUB; offload hands
    LiteRT the rest, where the C delegate finds one node to claim (the second SUB). The
    numbers are LiteRT's with the library loaded directly."""
    delegates = [
        offload.load_delegate("dummy", {"min_nodes_per_partition": 2}),
        offload.load_delegate(str(library), {"claim": "add_sub"}),
    ]
    interp = offload.Interpreter(model_content=_longer_model(), experimental_delegates=delegates)
    interp.allocate_tensors()
    got = run(interp, [X])
    assert [(p.delegate, p.nodes) for p in interp.plan().partitions] == [
        ("dummy", (0, 1)),
        ("litert", (2, 3, 4)),
    ]
    assert counters.read()["claimed_nodes"] == 1
    direct = litert.Interpreter(
        model_content=_longer_model(),
        experimental_delegates=[litert.load_delegate(str(library), {"claim": "add_sub"})],
    )
    direct.allocate_tensors()
    assert_identical(got, run(direct, [X]), "mixed")


def test_prepare_runs_even_when_nothing_is_claimed(library: Path, counters: Counters) -> None:
    """claim: none: LiteRT still calls the library's Prepare on the partition."""
    interp = offload.Interpreter(
        model_content=_model(),
        experimental_delegates=[offload.load_delegate(str(library), {"claim": "none"})],
    )
    interp.allocate_tensors()
    got = run(interp, [X])
    assert counters.read() == {"prepare_calls": 1, "claimed_nodes": 0, "invoke_calls": 0}
    assert_identical(got, _litert_with(library, {"claim": "none"}), "claim none")


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"bogus": "1"}, "unknown option 'bogus'"),
        ({"claim": "everything"}, "expected 'add_sub', 'none' or 'fail'"),
    ],
)
def test_options_the_library_refuses_are_typed_errors(
    library: Path, options: dict[str, str], match: str
) -> None:
    """The library's own refusal comes back as DelegateOptionsError (a ValueError, as from
    LiteRT's load_delegate) with its message, not as a crash."""
    with pytest.raises(DelegateOptionsError, match=match) as info:
        offload.load_delegate(str(library), options)
    assert isinstance(info.value, ValueError) and str(library) in str(info.value)


def test_a_missing_library_is_a_typed_error(tmp_path: Path) -> None:
    """A path to no library, or to a library without the external-delegate entry points:
    DelegateOptionsError naming it."""
    with pytest.raises(DelegateOptionsError, match="libnothing.so"):
        offload.load_delegate(str(tmp_path / "libnothing.so"))
    with pytest.raises(DelegateOptionsError, match="does not export tflite_plugin_create"):
        offload.load_delegate(ctypes.util.find_library("m") or "libm.so.6")


def test_a_partition_litert_refuses_falls_back_to_the_cpu(
    library: Path, counters: Counters
) -> None:
    """claim: fail makes LiteRT refuse the partition: the usual warning, the CPU reference's
    numbers; in strict mode a DelegateError."""
    delegate = offload.load_delegate(str(library), {"claim": "fail"})
    interp = offload.Interpreter(model_content=_model(), experimental_delegates=[delegate])
    with pytest.warns(UserWarning, match="'litert' failed to prepare partition 0.*failing on"):
        interp.allocate_tensors()
    got = run(interp, [X])
    reference = offload.Interpreter(model_content=_model(), delegates=[])
    reference.allocate_tensors()
    assert_identical(got, run(reference, [X]), "fallback")
    assert interp.delegate_kernels() == {}
    strict = offload.Interpreter(
        model_content=_model(), experimental_delegates=[delegate], allow_cpu_fallback=False
    )
    with pytest.raises(DelegateError, match="failing on request"):
        strict.allocate_tensors()


def test_external_delegate_path_flag_runs_the_library(
    library: Path, counters: Counters, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`offload diff --external_delegate_path x.so --external_delegate_options claim:add_sub`
    runs through litert with the library applied, and agrees with LiteRT exactly."""
    model = tmp_path / "add_sub.tflite"
    model.write_bytes(_model())
    argv = ["diff", "--graph", str(model), "--num_runs", "2", "--json"]
    argv += ["--external_delegate_path", str(library)]
    argv += ["--external_delegate_options", "claim:add_sub"]
    assert cli_main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["outputs"][0]["avg_error"] == 0.0
    assert counters.read()["claimed_nodes"] >= 2


def test_a_library_is_trial_loaded_once_per_file(
    library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before this process opens a library, a child process loads it (a corrupted one crashes
    the child, not this process): once per file, again only when the file changes."""
    from offload_litert import _library

    monkeypatch.setattr(_library, "_verdicts", {})
    started: list[str] = []
    trial = _library._trial_problem

    def counted(path: str) -> tuple[str | None, bool]:
        started.append(path)
        return trial(path)

    monkeypatch.setattr(_library, "_trial_problem", counted)
    copy = tmp_path / library.name
    shutil.copyfile(library, copy)
    offload.load_delegate(str(copy), {"claim": "add_sub"})
    offload.load_delegate(str(copy), {"claim": "none"})
    assert started == [str(copy)]
    os.utime(copy, ns=(0, 0))
    offload.load_delegate(str(copy), {"claim": "add_sub"})
    assert len(started) == 2


def _run_with(delegates: list[offload.Delegate], content: bytes) -> offload.Interpreter:
    interp = offload.Interpreter(model_content=content, experimental_delegates=delegates)
    interp.allocate_tensors()
    run(interp, [X])
    return interp


def test_load_delegate_makes_one_instance_every_interpreter_shares(
    library: Path, counters: Counters
) -> None:
    """The library makes its delegate and parses its options once, at load_delegate; two
    interpreters, and the two partitions of the second, apply that same instance."""
    delegate = offload.load_delegate(str(library), {"claim": "add_sub"})
    assert counters.life() == (1, 0, 1)
    first = _run_with([delegate], _model())
    mixed = [offload.load_delegate("dummy"), delegate]
    second = _run_with(mixed, _longer_model())
    assert [(p.delegate, p.nodes) for p in second.plan().partitions] == [
        ("dummy", (0, 1)),
        ("litert", (2,)),
        ("dummy", (3,)),
        ("litert", (4,)),
    ]
    assert counters.read()["prepare_calls"] == 3
    assert counters.life() == (1, 0, 1)
    # LiteRT's Delegate surface: its library handle and its one instance, as LiteRT's own
    # tests read them (interpreter._delegates[0]._library).
    assert first._delegates[0] is delegate
    assert delegate._library is not None
    assert ctypes.c_int.in_dll(delegate._library, "offload_test_delegates_created").value == 1
    assert delegate._get_native_delegate_pointer() == delegate._delegate_ptr != 0


def test_each_load_delegate_makes_an_instance_of_its_own(library: Path, counters: Counters) -> None:
    """Two loads are two instances, each with its options, each destroyed with its object."""
    a = offload.load_delegate(str(library))
    b = offload.load_delegate(str(library), {"claim": "none"})
    assert counters.life() == (2, 0, 1)
    assert a._delegate_ptr != b._delegate_ptr
    del a, b
    assert counters.life() == (2, 2, 1)


def test_the_instance_is_destroyed_once_after_its_last_user(
    library: Path, counters: Counters
) -> None:
    """Neither the delegate object nor one interpreter going destroys the instance while
    another interpreter uses it; the last one going destroys it, once, without waiting for
    the garbage collector (LiteRT users rely on `del interpreter` releasing a device)."""
    delegate = offload.load_delegate(str(library), {"claim": "add_sub"})
    a = _run_with([delegate], _model())
    b = _run_with([delegate], _model())
    del delegate, a
    assert counters.life() == (1, 0, 1)
    before = counters.read()["invoke_calls"]
    run(b, [X])
    assert counters.read()["invoke_calls"] == before + 1
    del b
    assert counters.life() == (1, 1, 1), "the instance outlived its last user (a cycle?)"
    gc.collect()
    assert counters.life() == (1, 1, 1)


def test_a_partition_litert_refused_keeps_no_instance(library: Path, counters: Counters) -> None:
    """claim: fail: the partition LiteRT refused runs on the CPU, and nothing of the failed
    attempt (LiteRT's half-built interpreter, its error) keeps the instance alive once the
    interpreter and the delegate object are gone."""
    delegate = offload.load_delegate(str(library), {"claim": "fail"})
    interp = offload.Interpreter(model_content=_model(), experimental_delegates=[delegate])
    with pytest.warns(UserWarning, match="failing on request"):
        interp.allocate_tensors()
    del delegate, interp
    assert counters.life() == (1, 1, 1), "the failed partition kept the instance (a cycle?)"


def test_a_refused_option_fails_at_load_delegate_as_in_litert(
    library: Path, counters: Counters
) -> None:
    """An option the library refuses is a ValueError at load_delegate, in LiteRT's words
    ("Failed to load delegate from <library>") followed by the library's own message; no
    instance is made, so none is destroyed later."""
    where = re.escape(f"Failed to load delegate from {str(library)!r}: ")
    with pytest.raises(ValueError, match=f"^{where}") as info:
        offload.load_delegate(str(library), {"claim": "everything"})
    assert isinstance(info.value, DelegateOptionsError)
    assert "found NULL; the library said: offload_test_add_sub: option claim" in str(info.value)
    gc.collect()
    assert counters.life() == (0, 0, 1)


def test_litert_itself_applies_the_offload_delegate(library: Path, counters: Counters) -> None:
    """LiteRT's own Interpreter takes the object load_delegate returned, as it takes its own
    Delegate: the same instance, held as long as that interpreter lives."""
    delegate = offload.load_delegate(str(library), {"claim": "add_sub"})
    interp = litert.Interpreter(model_content=_model(), experimental_delegates=[delegate])
    interp.allocate_tensors()
    got = run(interp, [X])
    assert counters.read()["claimed_nodes"] == 2
    del delegate
    assert counters.life() == (1, 0, 1)
    del interp
    assert counters.life() == (1, 1, 1)
    assert_identical(got, _litert_with(library, {"claim": "add_sub"}), "LiteRT with offload's")


def test_a_delegate_without_a_library_has_no_native_pointer() -> None:
    """The litert delegate without a C library has nothing for LiteRT to apply: a typed error
    saying so, and no library or instance."""
    delegate = offload.load_delegate("litert")
    assert delegate._library is None and delegate._delegate_ptr is None
    with pytest.raises(IncompatibleOptionError, match="external_delegate_path unset"):
        delegate._get_native_delegate_pointer()

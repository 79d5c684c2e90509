"""offload.patch_litert in this process: LiteRT's imports give offload, with the patch's
delegates, until undo(); offload's own LiteRT engine keeps the real module; the tensorflow
stand-in names what it does not provide."""

from __future__ import annotations

import gc
import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import offload
from offload.errors import StandInError, StandInImportError, UsageError

FIXTURE = str(Path(__file__).resolve().parent / "fixtures" / "small_cnn_float32.tflite")
_TF_INSTALLED = importlib.util.find_spec("tensorflow") is not None


@pytest.fixture
def patched(request: pytest.FixtureRequest) -> Iterator[offload.LiteRTPatch]:
    kwargs = getattr(request, "param", {})
    with offload.patch_litert(**kwargs) as patch:
        yield patch
    assert not patch.active


def test_imports_give_offload_until_undone():
    """Under the patch tflite_runtime.interpreter is offload's; after undo() it is gone again."""
    before = sys.modules.get("tflite_runtime")
    with offload.patch_litert([]):
        from tflite_runtime import interpreter as tfl
        from tflite_runtime.interpreter import Interpreter

        assert tfl.Interpreter is Interpreter
        assert issubclass(Interpreter, offload.Interpreter)
        assert tfl.load_delegate is offload.load_delegate
    assert sys.modules.get("tflite_runtime") is before
    assert "tflite_runtime.interpreter" not in sys.modules
    if before is None:
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module("tflite_runtime.interpreter")


@pytest.mark.parametrize("patched", [{"delegates": ["dummy"]}], indirect=True)
def test_every_interpreter_gets_the_patch_delegates(patched: offload.LiteRTPatch):
    """Each interpreter the program makes gets its own delegates, from the patch's names."""
    from tflite_runtime.interpreter import Interpreter

    first, second = Interpreter(model_path=FIXTURE), Interpreter(model_path=FIXTURE)
    assert [d.name for d in first.delegates] == ["dummy"]
    assert first.delegates[0] is not second.delegates[0]


@pytest.mark.parametrize("patched", [{"delegates": ["dummy"]}], indirect=True)
def test_program_delegates_come_first_and_are_not_repeated(patched: offload.LiteRTPatch):
    """Delegates the program passes itself keep their place; the patch adds only the others."""
    from tflite_runtime.interpreter import Interpreter, load_delegate

    own = load_delegate("dummy")
    it = Interpreter(model_path=FIXTURE, experimental_delegates=[own])
    assert it.delegates == [own]


def test_reference_alone_and_auto_pass_through():
    """delegates=[] gives the CPU reference alone; 'auto' reaches the Interpreter as 'auto'."""
    with offload.patch_litert([]) as patch:
        from tflite_runtime.interpreter import Interpreter

        assert Interpreter(model_path=FIXTURE).delegates == []
    assert patch.delegates_for([]) == []
    with offload.patch_litert("auto") as auto:
        assert auto.delegates_for([]) == "auto"
        # auto chooses among all delegates: a program that names its own keeps them
        assert auto.delegates_for([offload.load_delegate("dummy")]) is None
    with offload.patch_litert("dummy") as one:  # one name, as Interpreter(delegates="x")
        assert [d.name for d in one.delegates_for([])] == ["dummy"]


def test_litert_engine_keeps_the_real_module():
    """ai_edge_litert.interpreter is offload's under the patch, but the litert delegate still
    runs the real LiteRT, and undo() puts the real module back where it was."""
    real = pytest.importorskip("ai_edge_litert.interpreter")
    engine = pytest.importorskip("offload_litert._engine")
    with offload.patch_litert([]):
        import ai_edge_litert
        from ai_edge_litert import interpreter as lite

        assert issubclass(lite.Interpreter, offload.Interpreter)
        assert ai_edge_litert.interpreter is lite
        assert engine.litert is real
    assert sys.modules["ai_edge_litert.interpreter"] is real
    assert importlib.import_module("ai_edge_litert").interpreter is real


def test_stand_in_module_has_litert_s_api():
    """The stand-in module passes the same parity check as offload.interpreter."""
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    from tests.test_litert_parity import module_problems

    with offload.patch_litert([]):
        stand_in = importlib.import_module("tflite_runtime.interpreter")
        assert module_problems(litert, stand_in) == []


def test_compiled_model_stand_in_and_the_engine_s_own():
    """ai_edge_litert.compiled_model is offload's under the patch (LiteRT's names, checked as
    offload.compiled_model is), while the litert delegate keeps the real CompiledModel API."""
    theirs = pytest.importorskip("ai_edge_litert.compiled_model")
    engine = pytest.importorskip("offload_litert._engine")
    from tests._parity import Parity

    with offload.patch_litert([]):
        stand_in = importlib.import_module("ai_edge_litert.compiled_model")
        assert stand_in.CompiledModel is offload.CompiledModel
        parity = Parity(offload.compiled_model.DIFFERENCES, stand_in.__name__)
        assert parity.module_problems(theirs, stand_in) == []
        assert engine.compiled_api is not None and engine.compiled_api[0] is theirs
    assert sys.modules["ai_edge_litert.compiled_model"] is theirs


@pytest.mark.parametrize("patched", [{"tensorflow": True}], indirect=True)
def test_tensorflow_stand_in_names_what_it_lacks(patched: offload.LiteRTPatch):
    """Asked for, tf.lite.Interpreter is offload's; tf.constant and tensorflow.keras fail,
    saying why."""
    import tensorflow as tf

    assert patched.stood_in_for_tensorflow
    assert issubclass(tf.lite.Interpreter, offload.Interpreter)
    assert tf.lite.experimental.load_delegate is offload.load_delegate
    with pytest.raises(StandInError, match=r"tensorflow\.constant: .*tf\.lite's Interpreter"):
        tf.constant(1.0)
    with pytest.raises(StandInError, match=r"tensorflow\.lite\.TFLiteConverter"):
        tf.lite.TFLiteConverter  # noqa: B018
    assert not hasattr(tf, "keras")  # hasattr-style probing still works (AttributeError)
    with pytest.raises(StandInImportError, match="No module named 'tensorflow.keras'"):
        importlib.import_module("tensorflow.keras")


@pytest.mark.skipif(_TF_INSTALLED, reason="TensorFlow is installed")
@pytest.mark.parametrize(
    "patched", [{}, {"tensorflow": None}, {"tensorflow": False}], indirect=True
)
def test_tensorflow_left_alone_unless_asked(patched: offload.LiteRTPatch):
    """By default (and with tensorflow=False) there is no stand-in: a probe for TensorFlow,
    by find_spec or by import, finds none, as it would without offload."""
    assert not patched.stood_in_for_tensorflow
    assert importlib.util.find_spec("tensorflow") is None
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("tensorflow")


@pytest.mark.filterwarnings("ignore::UserWarning")  # the plan for dummy is fragmented: so be it
def test_delegation_report_outlives_the_interpreter():
    """The report says what ran where, also for an interpreter the program has freed."""
    with offload.patch_litert(["dummy"]) as patch:
        from ai_edge_litert.interpreter import Interpreter

        it = Interpreter(model_path=FIXTURE)
        it.allocate_tensors()
        del it
        gc.collect()
        (row,) = patch.delegation_report()
    assert row["via"] == "ai_edge_litert.interpreter" and row["model"] == FIXTURE
    assert row["delegates"] == ["dummy"] and row["error"] is None
    assert row["report"]["node_count"] == len(row["report"]["cpu"]["nodes"]) + len(
        row["report"]["delegates"]["dummy"]["nodes"]
    )


def test_patch_checks_delegates_first_and_once():
    """An unknown delegate fails at patch time and patches nothing; a second patch is refused."""
    with pytest.raises(offload.errors.PluginError):
        offload.patch_litert(["no_such_delegate"])
    assert "tflite_runtime.interpreter" not in sys.modules
    with offload.patch_litert([]):
        with pytest.raises(UsageError, match="already active"):
            offload.patch_litert([])
    with pytest.raises(UsageError, match="not among the delegates"):
        offload.patch_litert(["dummy"], options={"gpu_opencl": {}})


def test_results_equal_offload_direct():
    """An interpreter made through the stand-in computes what offload.Interpreter computes."""
    x = np.random.default_rng(0).standard_normal((1, 64, 64, 3)).astype(np.float32)
    direct = offload.Interpreter(model_path=FIXTURE, delegates=[])
    direct.allocate_tensors()
    direct.set_tensor(0, x)
    direct.invoke()
    with offload.patch_litert([]):
        from tflite_runtime.interpreter import Interpreter

        it = Interpreter(FIXTURE)  # positional model_path, as LiteRT programs write it
        it.allocate_tensors()
        it.set_tensor(0, x)
        it.invoke()
    out = direct.get_output_details()[0]["index"]
    np.testing.assert_array_equal(it.get_tensor(out), direct.get_tensor(out))


def test_undo_restores_a_package_imported_while_patched(tmp_path: Path):
    """A real ai_edge_litert first imported under the patch loses the stand-in attribute at
    undo(), and importing its interpreter then gives the real module (a fresh process, where
    nothing imported LiteRT before)."""
    pytest.importorskip("ai_edge_litert.interpreter")
    script = tmp_path / "probe.py"
    script.write_text(
        "import offload\n"
        "patch = offload.patch_litert([])\n"
        "import ai_edge_litert.interpreter as lite\n"
        "import ai_edge_litert\n"
        "assert ai_edge_litert.interpreter is lite\n"
        "assert issubclass(lite.Interpreter, offload.Interpreter)\n"
        "patch.undo()\n"
        "assert 'interpreter' not in vars(ai_edge_litert)\n"
        "import ai_edge_litert.interpreter as real\n"
        "assert not issubclass(real.Interpreter, offload.Interpreter)\n"
    )
    env = {**os.environ, "OFFLOAD_PLUGINS": "dummy"}  # no plugin imports LiteRT first
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr

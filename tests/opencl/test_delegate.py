"""gpu_opencl's declaration, options, availability, flags and error reporting."""

from __future__ import annotations

import argparse

import numpy as np
import pyopencl as cl
import pytest

import offload
from offload._providers import add_provider_flags, delegates_from_args
from offload.errors import DelegateError, DelegateOptionsError
from offload.model import ModelBuilder
from offload_gpu_opencl import (
    GpuOpenCLDelegate,
    GpuOpenCLError,
    KernelBuildError,
    _device,
    _source,
    offload_delegate_providers,
    status_name,
)
from offload_gpu_opencl._ops import SPECS


def test_unavailable_without_platform(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OpenCL platform: unavailable, with a reason a person can act on."""

    def no_platform() -> list:
        raise cl.LogicError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")

    monkeypatch.setattr(cl, "get_platforms", no_platform)
    availability = GpuOpenCLDelegate.availability()
    assert not availability.available
    assert "no OpenCL platform" in availability.reason
    monkeypatch.setattr(cl, "get_platforms", lambda: [])
    assert "no OpenCL device" in GpuOpenCLDelegate.availability().reason


def test_options_are_validated() -> None:
    """Unknown options are rejected by name; the documented ones are accepted."""
    with pytest.raises(DelegateOptionsError, match="precision_loss"):
        GpuOpenCLDelegate({"precision_los_allowed": True})
    d = GpuOpenCLDelegate(
        {
            "precision_loss_allowed": True,
            "enable_quant": False,
            "serialization_dir": "/tmp/x",
            "model_token": "t",
            "platform": 0,
            "device": "pthread",
            "max_delegated_partitions": 1,
            "min_nodes_per_partition": 2,
        }
    )
    assert d.options.platform == 0 and d.options.device == "pthread"


def test_device_selection_by_name_and_index() -> None:
    """platform/device select by index or case-insensitive name substring."""
    (pi, platform, di, device), *_ = _device.list_devices()
    by_index = _device.open_device(pi, di)
    by_name = _device.open_device(platform.name[:6].upper(), device.name[:4])
    assert by_index.device == by_name.device == device
    with pytest.raises(GpuOpenCLError, match="no OpenCL device matches"):
        _device.open_device("no such platform", None)


def test_declared_ops_follow_litert() -> None:
    """LiteRT's GPU op list with its version limits, rank <= 4, SOFTMAX beta == 1."""
    caps = GpuOpenCLDelegate().capabilities
    # With quantization on, the int8 and hybrid (dynamic-range) versions of the convolutions.
    assert caps.op("DEPTHWISE_CONV_2D").versions == (1, 6)
    assert caps.op("CONV_2D").versions == (1, 5)
    assert caps.op("RESIZE_BILINEAR").versions == (1, 3)
    assert caps.op("SOFTMAX").options == {"beta": 1.0}
    assert all(c.max_rank == 4 for c in caps.ops)
    assert set(caps.op("CONV_2D").fused_activations) == {
        "NONE",
        "RELU",
        "RELU_N1_TO_1",
        "RELU6",
        "TANH",
    }
    float_only = GpuOpenCLDelegate({"enable_quant": False}).capabilities
    assert float_only.op("ADD").versions == (1, 1)
    assert float_only.op("DEPTHWISE_CONV_2D").versions == (1, 2)
    assert float_only.op("QUANTIZE") is None
    assert {t: s.support for t, s in caps.model_types.items()} == dict.fromkeys(
        ("float32", "float16", "dynamic_range", "int8", "qat"), "yes"
    )


def test_each_declared_op_has_one_spec() -> None:
    """The declaration is built from the op registry: every declared op has its spec (check,
    shape rule, lowering) and every spec is declared, QUANTIZE only with quantization on."""
    declared = [c.op for c in GpuOpenCLDelegate().capabilities.ops]
    assert sorted(declared) == sorted(SPECS)
    float_only = {c.op for c in GpuOpenCLDelegate({"enable_quant": False}).capabilities.ops}
    assert float_only == set(SPECS) - {"QUANTIZE"}


def test_enable_quant_false_rejects_quantized_models() -> None:
    """With enable_quant=False a quantized model is rejected once, with the reason."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 4), np.int8, quantization=(0.1, 0))
    y = b.add_tensor("y", (1, 4), np.int8, quantization=(0.1, 0))
    b.add_operator("ADD", [x, x], [y], version=2)
    b.add_output(y)
    interp = offload.Interpreter(
        model_content=b.build(),
        delegates=[offload.load_delegate("gpu_opencl", options={"enable_quant": False})],
    )
    plan = interp.plan()
    assert "enable_quant" in plan.model_rejections["gpu_opencl"]
    assert plan.nodes_of("gpu_opencl") == []


def test_unsupported_nodes_get_reasons() -> None:
    """Constraints the delegate cannot meet leave the node on the CPU, with the reason."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 4, 4, 3))
    wt = b.add_input("w", (2, 1, 1, 3))
    y = b.add_tensor("y", (1, 4, 4, 2))
    b.add_operator("CONV_2D", [x, wt, -1], [y], {"padding": "SAME", "stride_h": 1, "stride_w": 1})
    z = b.add_tensor("z", (1, 4, 4, 2))
    b.add_operator("SOFTMAX", [y], [z], {"beta": 2.0})
    b.add_output(z)
    plan = offload.Interpreter(model_content=b.build(), delegates=["gpu_opencl"]).plan()
    reasons = plan.node_reasons["gpu_opencl"]
    assert "weights (input 1) must be constant" in reasons[0]
    assert "beta" in reasons[1]


def test_provider_flags() -> None:
    """--use_gpu and the --gpu_* flags turn into gpu_opencl options."""
    providers = offload_delegate_providers()
    parser = argparse.ArgumentParser()
    add_provider_flags(parser, providers)
    args = parser.parse_args(
        [
            "--use_gpu",
            "--gpu_precision_loss_allowed",
            "true",
            "--gpu_serialization_dir",
            "/tmp/c",
            "--gpu_model_token",
            "m",
            "--gpu_max_delegated_partitions",
            "2",
            "--gpu_enable_quant",
            "false",
        ]
    )
    ((name, options),) = delegates_from_args(args, providers)
    assert name == "gpu_opencl"
    assert options == {
        "precision_loss_allowed": True,
        "serialization_dir": "/tmp/c",
        "model_token": "m",
        "max_delegated_partitions": 2,
        "enable_quant": False,
    }
    GpuOpenCLDelegate(options)


def test_status_codes_have_names() -> None:
    """OpenCL status codes are named in one place."""
    assert status_name(-5) == "CL_OUT_OF_RESOURCES"
    assert status_name(-11) == "CL_BUILD_PROGRAM_FAILURE"
    assert status_name(-9999) == "OpenCL status -9999"


def test_build_failure_names_kernel_and_carries_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel that does not compile raises KernelBuildError with its name and the log."""
    monkeypatch.setitem(_source.KERNELS, "broken", "__kernel void broken() { undeclared_x; }")
    handle = _device.open_device(None, None)
    with pytest.raises(KernelBuildError) as info:
        _device.build_program(handle, "-DBROKEN_TEST", None, "k")
    assert info.value.kernel == "broken"
    assert "undeclared_x" in info.value.log
    assert isinstance(info.value, DelegateError)
    assert "CL_BUILD_PROGRAM_FAILURE" in str(info.value)

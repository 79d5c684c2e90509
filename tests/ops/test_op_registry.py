"""The CPU reference's op registry: every op module is listed in OP_MODULES, and every listed
module exists and registers the kernel of the op it is named after."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import offload.ops
from offload.ops import OpKernel, supported_ops
from offload.ops._registry import _KERNELS, OP_MODULES


def _op_modules() -> set[str]:
    # One op per public module; the underscore modules are the registry, the kernel base and
    # the family helpers the op modules share, and hold no op of their own.
    modules = pkgutil.iter_modules(offload.ops.__path__)
    return {m.name for m in modules if not m.name.startswith("_")}


def _kernels_defined_in(module: str) -> list[type[OpKernel]]:
    mod = importlib.import_module(f"offload.ops.{module}")
    return [
        cls
        for cls in vars(mod).values()
        if inspect.isclass(cls)
        and issubclass(cls, OpKernel)
        and cls.__module__ == mod.__name__
        and cls.op
    ]


def test_every_op_module_is_in_op_modules():
    """An op module missing from OP_MODULES would leave its op without a kernel, silently."""
    found = _op_modules()
    assert not found - set(OP_MODULES), f"op modules not in OP_MODULES: {found - set(OP_MODULES)}"


def test_every_module_in_op_modules_exists():
    """OP_MODULES names no module that is not in the package, and none twice."""
    found = _op_modules()
    assert not set(OP_MODULES) - found, f"OP_MODULES without a module: {set(OP_MODULES) - found}"
    assert len(OP_MODULES) == len(set(OP_MODULES))


def test_every_op_module_registers_the_kernel_of_its_op():
    """Module ``x.py`` defines one kernel, for op ``X``, and the registry returns that kernel."""
    supported = supported_ops()
    for module in OP_MODULES:
        kernels = _kernels_defined_in(module)
        assert [k.op for k in kernels] == [module.upper()], f"offload.ops.{module}: {kernels}"
        assert _KERNELS[module.upper()] is kernels[0], f"offload.ops.{module} is not registered"
        assert supported[module.upper()] == kernels[0].max_version


def test_no_op_is_registered_from_outside_its_module():
    """Every kernel offload registers lives in the module named after its op."""
    supported_ops()
    for op, cls in _KERNELS.items():
        if cls.__module__.startswith("offload.ops."):
            assert cls.__module__ == f"offload.ops.{op.lower()}", f"{op}: {cls.__module__}"


def test_every_kernel_implements_run_underscore_and_none_overrides_run():
    """Kernels implement ``_run``; ``OpKernel.run`` alone checks outputs and wraps errors."""
    supported_ops()
    for op, cls in _KERNELS.items():
        if not cls.__module__.startswith("offload.ops."):
            continue
        assert cls._run is not OpKernel._run, f"{op} does not implement _run"
        for klass in cls.__mro__[: cls.__mro__.index(OpKernel)]:
            assert "run" not in vars(klass), f"{op}: {klass.__qualname__} overrides run"

"""The built wheels, as users install them: ``make test`` builds a wheel of the core and of
each plugin, installs them (without the editable sources) into build/wheel-site, and runs
this file with a few packaging-sensitive tests against them (``make wheel-test``).

Here every module must come from the wheels, every plugin must be found through its wheel's
entry point, and the files that are not Python (OpenCL kernels, the ``offload run`` site
hook, ``py.typed``) must be inside them. Outside that run (no ``OFFLOAD_WHEEL_SITE``) the
file skips.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from pathlib import Path

import pytest

SITE = os.environ.get("OFFLOAD_WHEEL_SITE")
pytestmark = pytest.mark.skipif(
    not SITE, reason="runs only against the built wheels (make wheel-test sets OFFLOAD_WHEEL_SITE)"
)
PLUGINS = (
    "offload_dummy",
    "offload_gpu_opencl",
    "offload_litert",
    "offload_openvino",
    "offload_coreml",
)


def _inside(path: str | os.PathLike[str]) -> bool:
    assert SITE is not None
    return Path(path).resolve().is_relative_to(Path(SITE).resolve())


def test_core_and_plugins_import_from_the_wheels():
    import offload

    assert _inside(offload.__file__), offload.__file__
    for name in PLUGINS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue  # left out with SKIP_PLUGINS
        assert _inside(module.__file__), f"{name} imported from {module.__file__}"


def test_plugins_are_found_through_the_wheels_entry_points():
    import offload

    found = {p.distribution: p for p in offload.list_plugins()}
    assert "offload-dummy" in found
    for dist in found:
        files = importlib.metadata.distribution(dist).files or []
        entry_points = [f for f in files if f.name == "entry_points.txt"]
        assert entry_points and _inside(entry_points[0].locate()), dist
    assert "dummy" in {d.name for d in offload.list_delegates()}


def test_files_that_are_not_python_are_packaged():
    import offload

    root = Path(offload.__file__).parent
    assert (root / "py.typed").is_file()
    assert (root / "_run_site" / "sitecustomize.py").is_file()
    gpu = pytest.importorskip("offload_gpu_opencl")
    kernels = list((Path(gpu.__file__).parent / "cl").rglob("*.cl"))
    assert kernels, "gpu_opencl's OpenCL C sources are missing from its wheel"


def test_versions_are_the_wheels():
    import offload

    assert importlib.metadata.version("offload") == offload.__version__

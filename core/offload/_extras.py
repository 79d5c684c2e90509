"""Optional dependencies from the ``offload[tools]`` extra, imported when a feature needs them."""

from __future__ import annotations

import importlib
from typing import Any

from offload.errors import UsageError

__all__ = ["require_extra"]


def require_extra(module: str, what: str) -> Any:
    """Import ``module`` from the ``offload[tools]`` extra or fail with how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(
            f"{what} needs the Python package {module.split('.')[0]!r}, which is not installed; "
            "install the command-line extras with: pip install offload[tools]"
        ) from None

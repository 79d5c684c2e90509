"""Put in front of a program's ``sys.path`` by ``offload run``; nothing else imports it.

At start-up it only installs a finder that waits for the program's first LiteRT import
(``tflite_runtime``, ``ai_edge_litert``, and ``tensorflow`` when ``--tensorflow-stand-in``
asked for it): then it imports offload and calls ``offload._patch.patch_from_environment()``,
which replaces itself as the finder. Without the stand-in, ``import tensorflow`` is left to
Python, so a program probing for TensorFlow takes the branch it takes without offload; one
that dies for want of it is told about ``--tensorflow-stand-in``.
Programs and child processes that never import LiteRT pay for one small module, not for
offload, numpy and the plugins. A ``sitecustomize`` that this one hides (later on
``sys.path``) still runs, after it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import threading
from collections.abc import Sequence
from types import ModuleType, TracebackType

_HERE = os.path.dirname(os.path.abspath(__file__))
# offload._patch.CONFIG_ENV, spelled out: importing offload here is what this module avoids.
_CONFIG_ENV = "OFFLOAD_RUN_CONFIG"


def _tensorflow_stand_in() -> bool:
    """Whether ``offload run`` asked for the tensorflow stand-in."""
    try:
        config = json.loads(os.environ.get(_CONFIG_ENV) or "{}")
    except ValueError:
        return False  # patch_from_environment reports a bad config at the first LiteRT import
    return isinstance(config, dict) and config.get("tensorflow") is True


_STAND_IN_TF = _tensorflow_stand_in()
_ROOTS = ("tflite_runtime", "ai_edge_litert") + (("tensorflow",) if _STAND_IN_TF else ())


class _FirstLiteRTImport(importlib.abc.MetaPathFinder):
    """Does nothing until a LiteRT module is imported; then patches and steps aside."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._busy = False

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if self._busy or not any(
            fullname == root or fullname.startswith(root + ".") for root in _ROOTS
        ):
            return None
        with self._lock:
            if self._busy:  # offload's own imports while patching find the real modules
                return None
            self._busy = True
            try:
                if self in sys.meta_path:
                    sys.meta_path.remove(self)
                try:
                    from offload._patch import patch_from_environment
                except ImportError as exc:
                    raise ImportError(
                        f"offload run: this Python ({sys.executable}) cannot import offload "
                        f"({exc}); run the program with the Python offload is installed in"
                    ) from exc
                patch = patch_from_environment()
            finally:
                self._busy = False
        if patch is None or patch._finder is None:
            return None
        return patch._finder.find_spec(fullname, path, target)


def _hint_tensorflow_stand_in(
    kind: type[BaseException], value: BaseException, traceback: TracebackType | None
) -> None:
    """The program's excepthook, plus one line where it died importing a missing TensorFlow:
    Python's own message does not say that a tf.lite program has a stand-in for the asking."""
    _previous_excepthook(kind, value, traceback)
    if isinstance(value, ModuleNotFoundError) and value.name == "tensorflow":
        print(
            "offload run: tensorflow is not installed and offload stands in for it only when "
            "asked; if the program uses tf.lite.Interpreter alone, run it with "
            "offload run --tensorflow-stand-in",
            file=sys.stderr,
        )


_previous_excepthook = sys.excepthook


def _run_hidden_sitecustomize() -> None:
    others = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


sys.meta_path.insert(0, _FirstLiteRTImport())
if not _STAND_IN_TF:
    sys.excepthook = _hint_tensorflow_stand_in
_run_hidden_sitecustomize()

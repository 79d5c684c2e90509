"""Which builtin ops, and up to which version, the installed LiteRT runs.

Read from LiteRT itself rather than written down: for every builtin op of the schema offload
reads (``tflite.BuiltinOperator``), a one-operator model is handed to LiteRT's builtin op
resolver (``BUILTIN_WITHOUT_DEFAULT_DELEGATES``) at version 1, 2, ... until LiteRT answers
that it has no kernel for that version. The resolver is asked when the interpreter is built,
before any tensor is checked, so a model that is otherwise nonsense (no options, one float
input) still says whether the op and version are registered; an op that fails later for
another reason (missing options) is registered. About 400 tiny models, ~0.2 s, once per
process. XNNPACK takes a subset of these nodes and leaves the rest to the same builtin
kernels, so both kernel choices run the same set.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import json

import numpy as np
import tflite

from offload.cache import CacheDir, EntryStore, default_location
from offload.model import ModelBuilder
from offload_litert._engine import litert

__all__ = ["builtin_versions"]

# LiteRT's InterpreterBuilder, when no kernel is registered for an (op, version).
_NOT_REGISTERED = "Didn't find op for builtin opcode"
# No op goes past this; a version probe that reaches it means the answer is not understood.
_MAX_VERSION = 64


def _one_op_model(op: str, version: int) -> bytes:
    b = ModelBuilder(signature_key=None)
    x = b.add_input("x", shape=(1,), dtype=np.float32)
    y = b.add_tensor("y", shape=(1,), dtype=np.float32)
    b.add_operator(op, [x], [y], version=version)
    b.add_output(y)
    return b.build()


def _registered(op: str, version: int, strict_message: bool) -> bool:
    assert litert is not None
    try:
        litert.Interpreter(
            model_content=_one_op_model(op, version),
            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
        )
    except ValueError as exc:
        # Without the known message, any refusal counts as "not registered": smaller, not wrong.
        return strict_message and _NOT_REGISTERED not in str(exc)
    return True


@functools.cache
def builtin_versions() -> dict[str, int]:
    """Op name -> the highest version LiteRT's builtin resolver runs (from 1, no gaps).

    Kept in offload's cache (``offload.cache``, namespace ``litert``) for the installed LiteRT
    and plugin versions: building the ~650 probe models takes ~0.5 s, which every process
    that loads the plugins (every Interpreter's first use) would otherwise pay. A stored
    answer is read only through the cache's checks and then checked itself (op names of the
    schema, versions in range); anything refused is probed again. A cache that cannot be
    used is no error: the probe runs, as it did before there was one.
    """
    if litert is None:
        return {}
    store = _open_store()
    if store is not None:
        found = _load(store)
        if found is not None:
            return found
    versions = probe_versions()
    if store is not None:
        with contextlib.suppress(Exception):  # a cache that cannot take it changes nothing
            store.store(_CACHE_KEY, _CACHE_KIND, json.dumps(versions, sort_keys=True).encode())
    return versions


_CACHE_KEY = "builtin_versions"
_CACHE_KIND = "json"


def _op_names() -> list[str]:
    return sorted(
        n for n in vars(tflite.BuiltinOperator) if n.isupper() and n not in ("CUSTOM", "DELEGATE")
    )


def _open_store() -> EntryStore | None:
    try:
        context = {
            "ai-edge-litert": importlib.metadata.version("ai-edge-litert"),
            "offload-litert": importlib.metadata.version("offload-litert"),
            "ops": hashlib.sha256(" ".join(_op_names()).encode()).hexdigest()[:16],
        }
        directory = CacheDir.open(default_location("litert"))
        return EntryStore(
            directory, namespace="litert-ops", context=context, limits={_CACHE_KIND: 1 << 16}
        )
    except Exception:  # no cache here (refused, read-only home, no metadata): probe
        return None


def _load(store: EntryStore) -> dict[str, int] | None:
    """The stored answer, if it reads back as one: every name an op of the schema, every
    version an int in 1.._MAX_VERSION."""
    try:
        blob = store.load(_CACHE_KEY, _CACHE_KIND)
        if blob is None:
            return None  # not stored yet (or refused by the cache's own checks)
        found = json.loads(blob)
    except Exception:
        found = None
    names = set(_op_names())
    if (
        not isinstance(found, dict)
        or not found
        or not all(
            isinstance(op, str) and op in names and type(top) is int and 1 <= top < _MAX_VERSION
            for op, top in found.items()
        )
    ):
        with contextlib.suppress(Exception):
            store.discard(_CACHE_KEY, _CACHE_KIND, "not a table of op versions")
        return None
    return found


def probe_versions() -> dict[str, int]:
    """:func:`builtin_versions` asked of LiteRT itself, without the cache."""
    if litert is None:
        return {}
    # A version no op will reach must be refused with the known message; if it is not, the
    # message changed, and only clean builds count.
    strict = not _registered("ADD", 10_000, strict_message=True)
    names = _op_names()
    versions: dict[str, int] = {}
    for op in names:
        top = 0
        while top < _MAX_VERSION and _registered(op, top + 1, strict):
            top += 1
        if top:
            versions[op] = top
    return versions

"""offload's public surface as data, for the snapshot in tests/public_api.json.

What is read: ``offload.__all__`` (classes with their public methods, signatures, fields and
class attributes; functions with their signatures; constants with their values), the
``__all__`` of the public modules plugin authors and users import (quant, geometry, cache,
testing, errors, interpreter), the hook specs, and every deprecated form with its removal
version. Members inherited from outside offload
(pydantic's ``model_dump``, ``Exception.args``) are not offload's surface and are left out.

Regenerate after a deliberate change, and say what changed in CHANGELOG.md::

    .venv/bin/python -m tests._api_surface --write
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any

SNAPSHOT = Path(__file__).resolve().parent / "public_api.json"
MODULES = (
    "offload.quant",
    "offload.geometry",
    "offload.cache",
    "offload.testing",
    "offload.errors",
    "offload.interpreter",
    "offload.compiled_model",
    "offload.ops",
)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _text(value: Any) -> str:
    if isinstance(value, type):
        return value.__name__
    return _ADDRESS.sub("", str(value)).replace("typing.", "")


def _signature(obj: Any) -> str:
    try:
        return _text(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"


def _value(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, bytes):
        return repr(value)
    if isinstance(value, (tuple, list, frozenset, set)) and len(value) <= 64:
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [_value(v) for v in items]
    if isinstance(value, dict) and len(value) <= 64:
        return {str(k): _value(v) for k, v in value.items()}
    return f"<{type(value).__name__}>"


def _ours(klass: type) -> bool:
    return klass.__module__.split(".")[0] == "offload"


def _defining_class(cls: type, name: str) -> type | None:
    for klass in cls.__mro__:
        if name in vars(klass):
            return klass
    return None


def describe_class(cls: type) -> dict[str, Any]:
    """Bases, constructor, fields and public members of an offload class."""
    out: dict[str, Any] = {
        "kind": "class",
        "bases": [f"{b.__module__}.{b.__qualname__}" for b in cls.__bases__],
    }
    if issubclass(cls, enum.Enum):
        out["members"] = {m.name: _value(m.value) for m in cls}
        return out
    if issubclass(cls, BaseException):
        return out  # an error's surface is its name and bases
    fields = getattr(cls, "model_fields", None)  # pydantic: the fields are the constructor
    if isinstance(fields, dict):
        out["fields"] = {name: _pydantic_field(field) for name, field in fields.items()}
    else:
        out["signature"] = _signature(cls)
    if dataclasses.is_dataclass(cls):
        out["fields"] = {
            f.name: {
                "type": _text(f.type),
                "default": _value(f.default)
                if f.default is not dataclasses.MISSING
                else ("factory" if f.default_factory is not dataclasses.MISSING else "required"),
            }
            for f in dataclasses.fields(cls)
        }
    members: dict[str, Any] = {}
    field_names = set(out.get("fields", {}))
    for klass in reversed(cls.__mro__):  # declared class attributes without a value here
        if not _ours(klass):
            continue
        for name, annotation in vars(klass).get("__annotations__", {}).items():
            if not name.startswith("_") and name not in field_names and not hasattr(cls, name):
                members[name] = f"declared {_text(annotation)}"
    for name in sorted(dir(cls)):
        if name.startswith("_") and name not in ("__call__",):
            continue
        if name in field_names:
            continue
        klass = _defining_class(cls, name)
        if klass is None or not _ours(klass):
            continue
        raw = vars(klass)[name]
        if isinstance(raw, property):
            members[name] = "property"
        elif isinstance(raw, classmethod):
            members[name] = f"classmethod{_signature(getattr(cls, name))}"
        elif isinstance(raw, staticmethod):
            members[name] = f"staticmethod{_signature(getattr(cls, name))}"
        elif inspect.isfunction(raw):
            members[name] = f"method{_signature(raw)}"
        elif isinstance(raw, type):
            members[name] = f"class {raw.__module__}.{raw.__qualname__}"
        else:
            members[name] = {"attribute": _value(raw)}
    out["members"] = members
    return out


def _pydantic_field(field: Any) -> dict[str, Any]:
    if field.is_required():
        default: Any = "required"
    elif field.default_factory is not None:
        default = "factory"
    else:
        default = _value(field.default)
    return {"type": _text(field.annotation), "default": default}


def describe(obj: Any) -> Any:
    if inspect.ismodule(obj):
        return {"kind": "module", "name": obj.__name__}
    if isinstance(obj, type):
        return describe_class(obj) if _ours(obj) else {"kind": "class", "from": obj.__module__}
    if callable(obj):
        return {"kind": "function", "signature": _signature(obj)}
    return {"kind": "constant", "type": type(obj).__name__, "value": _value(obj)}


def hook_specs() -> dict[str, Any]:
    from offload import hookspecs

    specs = {}
    for name, fn in sorted(vars(hookspecs).items()):
        options = getattr(fn, f"{hookspecs.PROJECT}_spec", None)
        if name.startswith(hookspecs.PROJECT) and options is not None:
            # Only the semantics set (firstresult, historic): pluggy adds keys across versions.
            flags = sorted(key for key, value in dict(options).items() if value is True)
            specs[name] = {"signature": _signature(fn), "options": flags}
    return specs


def surface() -> dict[str, Any]:
    import offload

    data: dict[str, Any] = {
        "offload": {name: describe(getattr(offload, name)) for name in sorted(offload.__all__)}
    }
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        data[module_name] = {
            name: describe(getattr(module, name)) for name in sorted(module.__all__)
        }
    data["hookspecs"] = hook_specs()
    data["deprecated"] = deprecated()
    return data


def deprecated() -> dict[str, Any]:
    """Every deprecated form (offload._deprecation.DEPRECATIONS) with what replaces it and its
    removal version, and the module attributes kept, with a warning, outside ``__all__``."""
    from offload._deprecation import DEPRECATED_ATTRIBUTES, DEPRECATIONS

    forms = {
        key: {"old": d.old, "new": d.new, "since": d.since, "removal": d.removal}
        for key, d in sorted(DEPRECATIONS.items())
    }
    attributes = {
        f"{module}.{name}": entry.key
        for module, names in sorted(DEPRECATED_ATTRIBUTES.items())
        for name, entry in sorted(names.items())
    }
    return {"forms": forms, "module_attributes": attributes}


def main(argv: list[str]) -> int:
    text = json.dumps(surface(), indent=1, sort_keys=True) + "\n"
    if "--write" in argv:
        SNAPSHOT.write_text(text)
        print(f"wrote {SNAPSHOT}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

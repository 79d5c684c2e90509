"""Node options: one schema reflection for loader, builder and docs; enums by name everywhere."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

import offload
from offload._schema import OPTION_TYPES, option_field_map, option_fields

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = sorted((ROOT / "tests" / "fixtures").glob("*.tflite"))


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_node_options", ROOT / "scripts/gen_node_options.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reference_page_is_up_to_date() -> None:
    """docs/node-options.md is what scripts/gen_node_options.py generates now."""
    gen = _generator()
    assert gen.PAGE.read_text() == gen.render(), "run: python scripts/gen_node_options.py"


def test_op_options_is_public_and_is_what_nodes_carry() -> None:
    """offload.OpOptions is exported and is the type of every node's options."""
    assert "OpOptions" in offload.__all__
    model = offload.load_model(FIXTURES[0])
    assert all(isinstance(node.options, offload.OpOptions) for node in model.main.nodes)


def test_every_byte_sized_field_is_an_enum() -> None:
    """Every int8/uint8 options field maps to an enum, so a new one cannot stay a number."""
    for type_name in OPTION_TYPES:
        if type_name == "NONE":
            continue
        for field in option_fields(type_name):
            if field.kind == "scalar" and field.number_type in ("Int8", "Uint8"):
                assert field.enum is not None, f"{type_name}.{field.name} has no enum"


def test_enums_found_by_reflection() -> None:
    """Enum classes named after their table and field are found without a table entry."""
    assert option_field_map("LSHProjectionOptions")["type"].enum == "LSHProjectionType"
    assert option_field_map("MirrorPadOptions")["mode"].enum == "MirrorPadMode"
    weights_format = option_field_map("FullyConnectedOptions")["weights_format"]
    assert weights_format.enum == "FullyConnectedOptionsWeightsFormat"
    assert option_field_map("EmbeddingLookupSparseOptions")["combiner"].enum == "CombinerType"


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_loaded_enum_fields_are_names(path: Path) -> None:
    """In real models every enum-typed option comes back as a name."""
    for node in offload.load_model(path).main.nodes:
        if node.options.type_name == "NoOptions":
            continue
        for name, field in option_field_map(node.options.type_name).items():
            if field.enum is not None:
                assert isinstance(node.options[name], str), (node.describe(), name)

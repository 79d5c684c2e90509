"""Names in a model file are untrusted text: the command line shows their control and
formatting characters as escapes, never raw, whatever it prints them in."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from offload._cli import main
from offload.model.builder import ModelBuilder
from offload.tools._common import format_table
from offload.tools._terminal import terminal_text

# Clear the screen, set the window title, and a right-to-left override that hides text.
EVIL = "x\x1b[2J\x1b]0;owned\x07\u202eevil\u200b"
RAW = ("\x1b", "\x07", "\u202e", "\u200b")


@pytest.fixture
def evil_model(tmp_path: Path) -> Path:
    b = ModelBuilder()
    x = b.add_input(EVIL, (1, 4))
    y = b.add_tensor("y" + EVIL, (1, 4))
    z = b.add_tensor("z", (1, 4))
    b.add_operator("ADD", [x, b.add_constant("c", np.ones((1, 4), np.float32))], [y])
    b.add_operator("op" + EVIL, [y], [z], custom=True)  # a custom code nobody runs
    b.add_output(z)
    path = tmp_path / "evil.tflite"
    b.save(path)
    return path


def test_terminal_text_escapes_controls_and_keeps_layout():
    assert terminal_text(EVIL) == "x\\x1b[2J\\x1b]0;owned\\x07\\u202eevil\\u200b"
    assert terminal_text("a\tb\nc") == "a\tb\nc"  # the command line's own layout
    assert terminal_text("ünïcödé 模型") == "ünïcödé 模型"


@pytest.mark.parametrize(
    ("hidden", "shown"),
    [
        ("\u00ad", "\\xad"),  # soft hyphen
        ("\U000e0041", "\\U000e0041"),  # a tag character: hidden ASCII 'A'
        ("\U0001d173", "\\U0001d173"),  # musical formatting
        ("\U0001bca0", "\\U0001bca0"),  # shorthand format control
        ("\ufe0f", "\\ufe0f"),  # a variation selector, default-ignorable though not Cf
        ("\u3164", "\\u3164"),  # Hangul filler, drawn as nothing
    ],
)
def test_every_invisible_character_is_escaped(hidden: str, shown: str):
    assert terminal_text(f"a{hidden}b") == f"a{shown}b"


def test_a_name_cannot_start_a_table_line_of_its_own():
    table = format_table(["op", "where"], [["op\n  all 2 nodes on gpu_opencl", "cpu"]])
    assert len(table.splitlines()) == 3
    assert "op\\n  all 2 nodes on gpu_opencl" in table


@pytest.mark.parametrize("command", [["check"], ["check", "--json"], ["delegates"]])
def test_no_control_character_reaches_the_terminal(
    evil_model: Path, command: list[str], capsys: pytest.CaptureFixture[str]
):
    argv = [*command, str(evil_model)] if command[0] == "check" else command
    main(argv)
    out, err = capsys.readouterr()
    for raw in RAW:
        assert raw not in out and raw not in err
    if "--json" in command:  # JSON escapes in its own way: still valid, still naming the op
        assert "custom op 'opx" in json.dumps(json.loads(out))
    elif command[0] == "check":
        assert "\\u202eevil" in out  # shown, as an escape

"""Files that are not working libraries, given where a LiteRT C delegate goes
(``load_delegate("x.so")``, ``--external_delegate_path``): a truncated or corrupted library
killed the process inside dlopen (SIGBUS, SIGSEGV, an ld.so assertion), and a loader message
quoting bytes of the file or its name escaped as a UnicodeDecodeError (fuzz target
external_delegate). Each is now a DelegateOptionsError saying what was expected and found.

The cases that could crash run in one forked child process, once for the module: a crash fails
the case it stopped at (and those after it) instead of ending the session."""

from __future__ import annotations

import json
import os
import select
import signal
import struct
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from random import Random

import numpy as np
import pytest

import offload
from offload.errors import DelegateOptionsError, OffloadError

ELF64_LE = sys.platform.startswith("linux") and sys.byteorder == "little" and sys.maxsize > 2**32
CHILD_TIMEOUT_S = 60.0


def _load_each(paths: list[str], out: int) -> None:
    """In the child: load_delegate each path, writing a line before (so that a crash names
    its case) and one with the outcome after."""
    warnings.simplefilter("ignore")
    for path in paths:
        os.write(out, f"START {path}\n".encode())
        try:
            offload.load_delegate(path)
            outcome: dict[str, str | None] = {"error": None, "message": "loaded"}
        except OffloadError as exc:
            outcome = {"error": type(exc).__name__, "message": str(exc)}
        except Exception as exc:
            outcome = {"error": f"untyped {type(exc).__name__}", "message": repr(exc)}
        os.write(out, f"DONE {json.dumps([path, outcome])}\n".encode())


def _in_a_fork(paths: list[str]) -> tuple[dict[str, dict[str, str | None]], str, int]:
    """Each path's outcome from a forked copy of this process, where offload and LiteRT are
    already imported (a fresh interpreter would take ~1 s to import them); with the path a
    crash stopped at and the child's exit code (-N: killed by signal N)."""
    offload.list_delegates()  # plugin discovery here, once, not in the child
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read)
            _load_each(paths, write)
        finally:
            os._exit(0)
    os.close(write)
    chunks, deadline = [], time.monotonic() + CHILD_TIMEOUT_S
    with os.fdopen(read, "rb") as pipe:
        while select.select([pipe], [], [], max(0.0, deadline - time.monotonic()))[0]:
            chunk = os.read(pipe.fileno(), 65536)
            if not chunk:
                break
            chunks.append(chunk)
        else:
            os.kill(pid, signal.SIGKILL)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    found, started = {}, ""
    for line in b"".join(chunks).decode().splitlines():
        word, _, rest = line.partition(" ")
        if word == "START":
            started = rest
        elif word == "DONE":
            path, outcome = json.loads(rest)
            found[path] = outcome
    return found, started, code


def _real_library() -> bytes:
    """numpy's smallest extension module: a real shared library of this platform."""
    found = min(Path(np.__file__).parent.rglob("*.so"), key=lambda p: p.stat().st_size)
    return found.read_bytes()


def _elf64(data: bytes) -> bytearray:
    if not (ELF64_LE and data[:6] == b"\x7fELF\x02\x01"):
        pytest.skip("the crafted cases rewrite a 64-bit little-endian ELF file")
    return bytearray(data)


def _cut_without_section_table(data: bytes) -> bytes:
    """Cut in half, its section header table dropped (as stripped loaders ship them): only
    the program headers tell that the segments run past the file's end."""
    out = _elf64(data)[: len(data) // 2]
    struct.pack_into("<Q", out, 0x28, 0)  # e_shoff
    struct.pack_into("<HHH", out, 0x3A, 0, 0, 0)  # e_shentsize, e_shnum, e_shstrndx
    return bytes(out)


def _string_table_elsewhere(data: bytes) -> bytes:
    """Its dynamic section's DT_STRTAB pointing at an unmapped address: well formed on disk,
    and the loader reads through it while linking (SIGSEGV)."""
    out = _elf64(data)
    phoff, phnum = struct.unpack_from("<Q", out, 0x20)[0], struct.unpack_from("<H", out, 0x38)[0]
    for i in range(phnum):
        p_type, _, offset, _, _, filesz, _, _ = struct.unpack_from("<IIQQQQQQ", out, phoff + 56 * i)
        if p_type == 2:  # PT_DYNAMIC
            for at in range(offset, offset + filesz, 16):
                if struct.unpack_from("<q", out, at)[0] == 5:  # DT_STRTAB
                    struct.pack_into("<Q", out, at + 8, 0x7FFF_0000_0000)
                    return bytes(out)
    pytest.skip("numpy's library has no DT_STRTAB entry to rewrite")


def _fuzz_case(case: int) -> bytes:
    """The file of fuzz target external_delegate's case: one of this Python's own extension
    modules cut short or with header bytes changed, as the run that found it made it."""
    from tests import _fuzz_targets as fuzz

    return fuzz._library_bytes(Random(case))[0]


TRUNCATED: dict[str, Callable[[bytes], bytes]] = {
    "cut inside the ELF header": lambda data: data[:40],
    "cut inside its first segment": lambda data: data[:1000],
    "cut in half": lambda data: data[: len(data) // 2],
    "cut in half, section table dropped": _cut_without_section_table,
}
CORRUPTED: dict[str, Callable[[bytes], bytes]] = {
    "string table pointer rewritten": _string_table_elsewhere,
}
# Fuzz findings: 129 SIGBUS, 144 SIGSEGV, 11 an ld.so assertion (exit 127), 156 and 381 a
# loader message with bytes that are not UTF-8.
FUZZ_CASES = (129, 144, 11, 156, 381)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str | None]]:
    """Every case's outcome from one forked child process; a crash is the outcome of the case
    it stopped at and of those it never reached."""
    if not hasattr(os, "fork"):
        pytest.skip("the cases that could crash run in a forked child: no fork here")
    folder = tmp_path_factory.mktemp("broken_libraries")
    data = _real_library()
    made: dict[str, bytes] = {}
    for label, make in {**TRUNCATED, **CORRUPTED}.items():
        try:
            made[label] = make(data)
        except pytest.skip.Exception:
            continue  # its test skips with the reason
    for case in FUZZ_CASES:
        made[f"fuzz case {case}"] = _fuzz_case(case)
    paths: dict[str, str] = {}
    for i, (label, content) in enumerate(made.items()):
        path = folder / f"lib{i}.so"
        path.write_bytes(content)
        paths[str(path)] = label
    found, started, code = _in_a_fork(list(paths))
    outcomes = {paths[path]: outcome for path, outcome in found.items()}
    if code != 0:
        crash = f"the process died (exit {code}) loading {paths.get(started)!r}"
        for label in paths.values():
            outcomes.setdefault(label, {"error": "crash", "message": crash})
    return outcomes


def _assert_typed(outcome: dict[str, str | None] | None) -> str:
    assert outcome is not None, "the case was not run (its file could not be made here)"
    assert outcome["error"] == "DelegateOptionsError", outcome["message"]
    return str(outcome["message"])


@pytest.mark.parametrize("label", TRUNCATED)
def test_a_truncated_library_is_refused_by_its_headers(
    outcomes: dict[str, dict[str, str | None]], label: str
) -> None:
    """A copy of a real library cut short is refused from its headers (the loader would map
    pages past the file's end: SIGBUS), saying what was expected and what it found."""
    if label not in outcomes:
        pytest.skip("the crafted cases rewrite a 64-bit little-endian ELF file")
    message = _assert_typed(outcomes[label])
    assert "expected a shared library" in message
    if ELF64_LE:
        assert "cut short" in message or "no full header" in message, message


@pytest.mark.parametrize("label", CORRUPTED)
def test_a_corrupted_library_crashes_only_a_trial_load(
    outcomes: dict[str, dict[str, str | None]], label: str
) -> None:
    """A library whose headers hold but whose dynamic section sends the loader to an unmapped
    address crashes a child's trial load, not this process."""
    if label not in outcomes:
        pytest.skip("the crafted cases rewrite a 64-bit little-endian ELF file")
    message = _assert_typed(outcomes[label])
    assert "crashed a trial load in a child process (killed by SIGSEGV" in message


@pytest.mark.parametrize("case", FUZZ_CASES)
def test_fuzz_findings_are_typed_errors(
    outcomes: dict[str, dict[str, str | None]], case: int
) -> None:
    """The fuzz cases that crashed the process or escaped untyped give a typed error."""
    _assert_typed(outcomes.get(f"fuzz case {case}"))


@pytest.mark.parametrize("trial", [True, False], ids=["trial load", "no child to start"])
def test_a_loader_message_that_is_not_utf8_is_a_typed_error(
    trial: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library name with bytes that are not UTF-8, which the loader refuses (no such
    library): its message quotes them, and ctypes' UnicodeDecodeError becomes a
    DelegateOptionsError with the bytes escaped, from the trial load's loader and from this
    process's own (where no child Python can be started)."""
    name = os.fsdecode(b"liboffload_missing_\xff" + (b"_t" if trial else b"_n") + b".so")
    if not trial:
        monkeypatch.setattr(sys, "executable", "")
    with pytest.raises(DelegateOptionsError, match=r"liboffload_missing_\\xff"):
        offload.load_delegate(name)


def test_a_file_name_that_is_not_utf8_reaches_the_trial_load(tmp_path: Path) -> None:
    """A real library under a name that is not UTF-8 is trial-loaded under that name (its
    entry points looked up there), and named in the error as Python spells it."""
    path = os.path.join(tmp_path, os.fsdecode(b"lib\xfe.so"))
    Path(path).write_bytes(_real_library())
    with pytest.raises(DelegateOptionsError, match="does not export") as info:
        offload.load_delegate(path)
    assert repr(path) in str(info.value)


@pytest.mark.skipif(not ELF64_LE, reason="ELF header checks: 64-bit little-endian Linux")
@pytest.mark.parametrize(
    ("content", "found"),
    [
        (b"", "found an empty file"),
        (b"def delegate():\n    pass\n", "found a 25-byte file starting with b'def dele'"),
        (b"\xcf\xfa\xed\xfe" + bytes(60), "found a Mach-O file (a macOS library)"),
        (b"\x7fELF\x01\x01\x01" + bytes(60), "found one built for 32-bit"),
        (b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x03\x00\x02\x00" + bytes(44), "machine 2"),
    ],
    ids=["empty", "text", "Mach-O", "32-bit ELF", "other machine"],
)
def test_header_checks_say_what_was_expected_and_found(
    tmp_path: Path, content: bytes, found: str
) -> None:
    """A file that is not this platform's library format, or not for this Python's machine,
    is refused from its first bytes: what was expected and what was found."""
    path = tmp_path / "libwrong.so"
    path.write_bytes(content)
    with pytest.raises(DelegateOptionsError, match="expected a shared library") as info:
        offload.load_delegate(str(path))
    assert found in str(info.value)


def test_an_executable_is_not_a_shared_library(tmp_path: Path) -> None:
    """An ELF file of another type than a shared object (here ET_EXEC) is refused by type."""
    head = bytearray(Path(sys.executable).read_bytes()[:64])
    if head[:4] != b"\x7fELF":
        pytest.skip("this Python is not an ELF executable")
    struct.pack_into("<H" if head[5] == 1 else ">H", head, 16, 2)  # e_type = ET_EXEC
    path = tmp_path / "libexec.so"
    path.write_bytes(bytes(head))
    with pytest.raises(DelegateOptionsError, match=r"of type 2 \(a shared object is type 3\)"):
        offload.load_delegate(str(path))

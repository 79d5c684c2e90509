"""What a file must be before this process dlopens it as a LiteRT C delegate library.

The dynamic loader trusts the file it maps. A library cut short maps pages past the file's end
(SIGBUS when the loader touches them); corrupted dynamic entries or relocations crash it
(SIGSEGV) or fail one of its assertions (exit 127), all inside the calling process, before
ctypes can raise anything. LiteRT's own ``load_delegate`` dies the same way. So a library is
read first, cheaply: its header must be this platform's format and, for ELF, name a shared
object for this Python's machine whose segment and section tables lie within the file (most
truncations stop here). Then it is opened in a child Python, which also looks up the two
external-delegate entry points; only a library the child loaded, with both, is opened here.
A refusal by the child's loader is final too, with its message: with corrupted relocations the
same file is refused cleanly or crashes the loader depending on where address-space layout
randomisation put things (fuzz case 491 did both in five tries), so a refusal there does not
make a load here safe. The verdict is kept per file (device, inode, size, mtime, ctime), so
the child runs once per library per process: about 15 ms. What the library does once LiteRT
calls into it is beyond this check, and so is a corruption that a trial load survives by the
luck of its layout and this process's load would not.
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import stat
import struct
import subprocess
import sys
from typing import BinaryIO

__all__ = ["ENTRY_POINTS", "dlopen_message", "exports", "library_problem"]

# What a LiteRT external delegate library exports (external_delegate_interface.h).
ENTRY_POINTS = ("tflite_plugin_create_delegate", "tflite_plugin_destroy_delegate")
# A loader that takes longer than this is stuck (a constructor waiting forever, a FIFO): the
# largest vendor delegates, GPU runtimes and all, load in a few seconds.
TRIAL_TIMEOUT_S = 30.0

_ELF_MAGIC = b"\x7fELF"
_MACHO_MAGICS = {
    b"\xfe\xed\xfa\xce",
    b"\xce\xfa\xed\xfe",
    b"\xfe\xed\xfa\xcf",
    b"\xcf\xfa\xed\xfe",
    b"\xca\xfe\xba\xbe",  # universal (fat) binary
}
_PLATFORM_OF = {"ELF": "Linux", "Mach-O": "macOS", "PE": "Windows"}
_ET_DYN, _PT_LOAD, _PT_DYNAMIC = 3, 1, 2
# Per ELF class: header layout after e_ident, header size, program header layout and size.
_ELF_LAYOUT = {
    1: ("HHIIIIIHHHHHH", 52, "IIIIIIII", 32),
    2: ("HHIQQQIHHHHHH", 64, "IIQQQQQQ", 56),
}

# The child: dlopen the file as ctypes does here, look up the entry points, and say how it
# went on a line of its own (the library's constructors may print too), the loader's message
# in hex: it can hold any bytes of the file's name or contents. UnicodeDecodeError is ctypes
# failing to decode such a message (dlerror() quoting bytes that are not UTF-8).
_VERDICT = "offload-trial-load:"
_CHILD = f"""
import ctypes, sys
try:
    lib = ctypes.CDLL(sys.argv[1])
except OSError as exc:
    said = "refused " + str(exc).encode("utf-8", "backslashreplace").hex()
except UnicodeDecodeError as exc:
    said = "refused " + bytes(exc.object).hex()
else:
    missing = []
    for name in sys.argv[2:]:
        try:
            getattr(lib, name)
        except (AttributeError, UnicodeDecodeError):
            missing.append(name)
    said = " ".join(["missing", *missing]) if missing else "loaded"
print("\\n{_VERDICT}", said, flush=True)
"""

_verdicts: dict[tuple[object, ...], str | None] = {}


def library_problem(path: str) -> str | None:
    """Why ``path`` must not be dlopened in this process, or None when it may be.

    ``path`` is what ctypes would get: a file path, or (without a directory separator) a name
    the loader searches for. The answer is cached per file and per searched name.
    """
    if "\0" in path:
        return "the path holds a NUL character, which no file name can"
    size = None  # a name the loader searches for: no file to read here
    key: tuple[object, ...] = ("searched", path)
    if _has_directory(path):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return "no such file"
        except OSError as exc:
            return f"it cannot be read: {exc.strerror or exc}"
        if not stat.S_ISREG(st.st_mode):
            # The loader would read a FIFO or a device forever.
            return "expected a regular file, found a directory, device, FIFO or socket"
        size = st.st_size
        # The file itself, not its name (what realpath would give, at 8x the cost of this
        # stat): any write or replacement changes the inode, size, mtime or ctime.
        key = (st.st_dev, st.st_ino, size, st.st_mtime_ns, st.st_ctime_ns)
    if key in _verdicts:
        return _verdicts[key]
    problem = None if size is None else _file_problem(path, size)
    if problem is None:
        if not sys.executable:
            # An embedded interpreter with no Python to start: only the header is checked,
            # and that verdict is not kept.
            return None
        problem, final = _trial_problem(path)
        if not final:
            return problem
    _verdicts[key] = problem
    return problem


def dlopen_message(exc: OSError | UnicodeDecodeError | ValueError) -> str:
    """The loader's message in ``exc``, also when ctypes failed to decode it.

    ctypes decodes dlerror() as strict UTF-8; a message quoting bytes of a corrupted file or a
    non-UTF-8 file name raises UnicodeDecodeError instead of OSError, holding the raw bytes.
    """
    if isinstance(exc, UnicodeDecodeError):
        return _shown(bytes(exc.object))
    return _shown(str(exc))


def exports(handle: ctypes.CDLL, name: str) -> bool:
    """Whether the loaded library exports ``name``. Not ``hasattr``: ctypes raises the
    UnicodeDecodeError of a dlerror() message quoting a non-UTF-8 path, not AttributeError."""
    try:
        getattr(handle, name)
    except (AttributeError, UnicodeDecodeError):
        return False
    return True


def _shown(message: bytes | str) -> str:
    """A loader's message on one line, its invalid UTF-8 and control characters escaped: it
    can quote any bytes of a corrupted file (a symbol name, a section's contents)."""
    if isinstance(message, bytes):
        message = message.decode("utf-8", "backslashreplace")
    text = " ".join(message.split())
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def _has_directory(path: str) -> bool:
    """Whether the loader takes ``path`` as a file path rather than a name to search for."""
    return "/" in path or os.sep in path or bool(os.altsep and os.altsep in path)


def _file_problem(path: str, size: int) -> str | None:
    """Why the file's header says it is no library this process can load, or None."""
    expected = _expected_format()
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            found = _format_of(head)
            if found == expected == "ELF":
                return _elf_problem(f, head, size)
    except OSError as exc:
        return f"it cannot be read: {exc.strerror or exc}"
    if found == expected:
        return None  # Mach-O and PE: the loader, in the child, checks the rest
    if found is not None:
        article = "an" if found == "ELF" else "a"
        what = f"{article} {found} file (a {_PLATFORM_OF[found]} library)"
    elif size == 0:
        what = "an empty file"
    else:
        what = f"a {size}-byte file starting with {head[:8]!r}"
    return f"expected a shared library in this platform's format ({expected}), found {what}"


@functools.cache
def _expected_format() -> str:
    if sys.platform == "darwin":
        return "Mach-O"
    if sys.platform in ("win32", "cygwin"):
        return "PE"
    return "ELF"


def _format_of(head: bytes) -> str | None:
    if head[:4] == _ELF_MAGIC:
        return "ELF"
    if head[:4] in _MACHO_MAGICS:
        return "Mach-O"
    return "PE" if head[:2] == b"MZ" else None


@functools.cache
def _host_elf() -> tuple[int, int, int] | None:
    """(class, byte order, machine) of this Python's own executable, which a library must
    match; None where it cannot be read (then the loader, in the child, checks)."""
    try:
        with open(sys.executable, "rb") as f:
            head = f.read(20)
    except OSError:
        return None
    if len(head) < 20 or head[:4] != _ELF_MAGIC or head[5] not in (1, 2):
        return None
    order = "<" if head[5] == 1 else ">"
    return head[4], head[5], struct.unpack(order + "H", head[18:20])[0]


def _elf_problem(f: BinaryIO, head: bytes, size: int) -> str | None:
    """An ELF header and its program and section header tables against the file's size."""
    expected = "expected a shared library for this Python"
    if len(head) < 20:
        return f"{expected}, found an ELF file cut short at {size} bytes (no full header)"
    cls, data, version = head[4], head[5], head[6]
    if cls not in _ELF_LAYOUT or data not in (1, 2) or version != 1:
        return f"{expected}, found an ELF header with class {cls}, data {data}, version {version}"
    order = "<" if data == 1 else ">"
    machine = struct.unpack(order + "H", head[18:20])[0]
    host = _host_elf()
    if host is not None and (cls, data, machine) != host:
        bits = {1: "32", 2: "64"}
        return (
            f"{expected} ({bits[host[0]]}-bit, {'little' if host[1] == 1 else 'big'}-endian, "
            f"machine {host[2]}), found one built for {bits[cls]}-bit, "
            f"{'little' if data == 1 else 'big'}-endian, machine {machine}"
        )
    layout, header_size, ph_layout, ph_size = _ELF_LAYOUT[cls]
    if size < header_size:
        return (
            f"{expected}, found an ELF file cut short at {size} bytes (its header is {header_size})"
        )
    (e_type, _, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, _) = struct.unpack(
        order + layout, head[16:header_size]
    )
    if e_type != _ET_DYN:
        return f"{expected}, found an ELF file of type {e_type} (a shared object is type 3)"
    if phentsize != ph_size or phnum == 0:
        return (
            f"{expected}, found {phnum} program headers of {phentsize} bytes (expected {ph_size})"
        )
    cut = "; the file looks cut short or corrupted"
    if phoff + phnum * ph_size > size:
        return (
            f"{expected}, found its program headers at bytes {phoff}..{phoff + phnum * ph_size} "
            f"of a {size}-byte file{cut}"
        )
    if shoff and shoff + shnum * shentsize > size:
        return (
            f"{expected}, found its section headers at bytes {shoff}.."
            f"{shoff + shnum * shentsize} of a {size}-byte file{cut}"
        )
    f.seek(phoff)
    table = f.read(phnum * ph_size)
    loads: list[tuple[int, int]] = []
    dynamic: tuple[int, int] | None = None
    for i in range(phnum):
        fields = struct.unpack_from(order + ph_layout, table, i * ph_size)
        if cls == 2:
            p_type, _, offset, vaddr, _, filesz, memsz, _ = fields
        else:
            p_type, offset, vaddr, _, filesz, memsz, _, _ = fields
        if p_type not in (_PT_LOAD, _PT_DYNAMIC):
            continue
        if offset + filesz > size:
            return (
                f"{expected}, found segment {i} at bytes {offset}..{offset + filesz} of a "
                f"{size}-byte file{cut}"
            )
        if p_type == _PT_LOAD:
            loads.append((vaddr, vaddr + memsz))
        else:
            dynamic = (vaddr, vaddr + memsz)
    if not loads:
        return f"{expected}, found no loadable segment{cut}"
    # The loader reads the dynamic section from memory: outside every mapped segment it
    # would read an unmapped address.
    if dynamic and not any(lo <= dynamic[0] and dynamic[1] <= hi for lo, hi in loads):
        return (
            f"{expected}, found its dynamic section at addresses {dynamic[0]:#x}..{dynamic[1]:#x}"
            f", outside its loadable segments{cut}"
        )
    return None


def _trial_problem(path: str) -> tuple[str | None, bool]:
    """Open the library in a child Python: why not to open it here (None: it may be), and
    whether that is the file's verdict rather than this moment's (a timeout under load, no
    process to start), which is not kept."""
    # -I -S: no site packages or PYTHON* variables, ctypes is all the child needs; the
    # environment, LD_LIBRARY_PATH included, is this process's.
    command = [sys.executable, "-I", "-S", "-c", _CHILD, path, *ENTRY_POINTS]
    try:
        done = subprocess.run(command, capture_output=True, timeout=TRIAL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"a trial load in a child process did not finish in {TRIAL_TIMEOUT_S:g} s", False
    except OSError as exc:  # no process to start: fail closed, this process is at stake
        return f"no child process could trial-load it first: {exc}", False
    lines = done.stdout.decode("utf-8", "replace").splitlines()
    said = next((ln.split()[1:] for ln in reversed(lines) if ln.startswith(_VERDICT)), [])
    if done.returncode == 0 and said == ["loaded"]:
        return None, True
    if done.returncode == 0 and said[:1] == ["refused"]:
        try:
            message = _shown(bytes.fromhex("".join(said[1:])))
        except ValueError:
            message = "no message"
        return f"the loader refused it: {message}", True
    if done.returncode == 0 and said[:1] == ["missing"]:
        missing = " and ".join(said[1:])
        return f"it does not export {missing}, so it is not a LiteRT external delegate", True
    errors = done.stderr.strip().splitlines()
    detail = f": {_shown(errors[-1])[:300]}" if errors else ""
    if done.returncode < 0:
        try:
            name = signal.Signals(-done.returncode).name
        except ValueError:
            name = f"signal {-done.returncode}"
        how = f"crashed a trial load in a child process (killed by {name}{detail})"
    else:
        how = f"ended a trial load in a child process (exit status {done.returncode}{detail})"
    return (
        f"expected a library the loader can open, found one that {how}; the file looks corrupted",
        True,
    )

"""One sanitiser for everything offload's command line prints.

Names in a model file (tensors, subgraphs, signatures, custom op codes, metadata) are
untrusted text. Printed raw, an escape sequence in a tensor name can clear the screen, set the
terminal's title, or hide text behind a bidirectional override. The command line writes its
text through :class:`SafeStream`, which shows every control and formatting character as an
escape (``\\x1b``, ``\\u202e``), keeping only newlines and tabs: those are the command line's
own layout. JSON output never holds a raw control character (``json.dumps`` escapes them) and
HTML output is escaped where it is written, so both pass through unchanged.
"""

from __future__ import annotations

import contextlib
import re
import sys
import unicodedata
from collections.abc import Iterator
from typing import Any, TextIO

__all__ = ["SafeStream", "safe_output", "terminal_text"]

# ASCII's unsafe characters: the C0 controls but newline and tab, and DEL.
_ASCII_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
# Beyond ASCII, a character is shown as an escape when its Unicode category is a control (Cc),
# a format character (Cf: bidirectional marks and overrides, zero-width characters, the soft
# hyphen, tag characters that can spell hidden ASCII), a line or paragraph separator, private
# use, a surrogate or unassigned; and the default-ignorable characters of other categories,
# which terminals draw as nothing (fillers, variation selectors, the grapheme joiner).
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"})
_IGNORABLE = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0\U000e0100-\U000e01ef]"
)


def _escape(match: re.Match[str]) -> str:
    return _escape_char(match.group())


def _escape_char(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _unsafe(char: str) -> bool:
    if char in "\n\t":
        return False
    return unicodedata.category(char) in _UNSAFE_CATEGORIES or bool(_IGNORABLE.match(char))


def terminal_text(text: str) -> str:
    """``text`` with every control and invisible formatting character but newline and tab
    escaped."""
    if text.isascii():  # nearly everything printed: one regular expression pass
        return _ASCII_UNSAFE.sub(_escape, text)
    return "".join(_escape_char(c) if _unsafe(c) else c for c in text)


class SafeStream:
    """A text stream that writes through :func:`terminal_text`; everything else is the
    wrapped stream's (``fileno``, ``isatty``, ``encoding``...)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(terminal_text(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def safe_output() -> Iterator[None]:
    """stdout and stderr through :class:`SafeStream` for the duration (already wrapped ones
    are left as they are)."""
    saved = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, SafeStream):
        sys.stdout = SafeStream(sys.stdout)  # type: ignore[assignment]
    if not isinstance(sys.stderr, SafeStream):
        sys.stderr = SafeStream(sys.stderr)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved

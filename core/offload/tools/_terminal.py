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
from collections.abc import Iterator
from typing import Any, TextIO

__all__ = ["SafeStream", "safe_output", "terminal_text"]

# C0 controls but newline and tab, DEL and the C1 controls, and the invisible formatting
# characters that reorder or hide text (bidirectional marks, overrides and isolates, zero-width
# characters, line and paragraph separators, the byte-order mark, interlinear annotations).
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f"
    "\ufeff\ufff9-\ufffb]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_text(text: str) -> str:
    """``text`` with every control and formatting character but newline and tab escaped."""
    return _UNSAFE.sub(_escape, text)


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

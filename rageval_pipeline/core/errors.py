"""One error type for bad input, so every entry point can print one clear line and exit 2."""

from __future__ import annotations

import re
from pathlib import Path

# What a terminal or a log would act on rather than show: C0 and C1 controls, DEL, the line
# and paragraph separators and the bidirectional overrides; the lone surrogates Python gives a
# file name's bytes that are not UTF-8 (they cannot be written out); and the escaping backslash.
_UNPRINTABLE = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff\\]"
)
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\\": "\\\\"}


def printable(name: str) -> str:
    """A file name (or any text from outside) as one line that shows what it holds: each
    character a terminal would act on is escaped (`\\t`, `\\n`, `\\x1b`, `\\u202e`), and so is
    the backslash, so two names never print alike and a newline never starts a new line."""
    return _UNPRINTABLE.sub(lambda m: _NAMED.get(m[0]) or _escape(m[0]), name)


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class InputError(ValueError):
    """Bad user input: names the file, the line (when there is one), the field and the problem."""

    def __init__(
        self,
        path: str | Path | None,
        problem: str,
        *,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        self.problem = problem
        super().__init__(self.describe())

    def describe(self) -> str:
        where = printable(self.path) if self.path is not None else "<input>"
        if self.line is not None:
            where += f":{self.line}"
        if self.field:
            where += f": {self.field}"
        return f"{where}: {self.problem}"


class NetworkError(InputError):
    """A network call that failed for good: names the URL (no query string), never a header,
    and is never chained to the httpx exception (that one carries the request's headers)."""

    def __init__(self, url: str, problem: str) -> None:
        super().__init__(url, problem)


class ArchiveError(InputError):
    """An archive that cannot be used (md5, unsafe member, a limit): names the URL or file."""

    def __init__(self, where: str | Path, problem: str) -> None:
        super().__init__(where, problem)

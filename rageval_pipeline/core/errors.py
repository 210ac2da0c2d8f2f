"""One error type for bad input, so every entry point can print one clear line and exit 2."""

from __future__ import annotations

from pathlib import Path


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
        where = self.path or "<input>"
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

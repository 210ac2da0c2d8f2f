"""Bounds on untrusted input: the file limits (`settings.limits.FileLimits`, `RAGEVAL_MAX_*`),
quoting of user values in errors, reading a regular file within the size limit, a data file
within the decompression limit, and `confined`, the one check for a path that a user file names.
Documented in docs/limits.md.

Importing this module imports no pydantic (0.15 s): `rageval eval` starts reading its run with
`input_bytes` first thing, and the limits are loaded on their first use."""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from rageval_pipeline.core.errors import InputError, printable
from rageval_pipeline.core.settings import file_defaults

if TYPE_CHECKING:
    from rageval_pipeline.core.settings.limits import FileLimits


def file_limits() -> FileLimits:
    """The file limits, read from the environment on each call (so a change applies at once)."""
    from rageval_pipeline.core.settings.limits import FileLimits

    return FileLimits.from_env()


def quote_json(value: Any) -> str:
    """A JSON rendering of a user value for error messages, cut to RAGEVAL_MAX_QUOTE_CHARS: for
    values of structured files (YAML, JSON), shown as those files write them. A field of a
    delimited text file is shown by `field_checks.quote_repr` instead."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    most = file_limits().quote_chars
    return text if len(text) <= most else text[: max(most - 3, 0)] + "..."


def file_kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISREG, "a file"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def absent(path: Path) -> str | None:
    """Why `path` cannot be used at all (missing, or a symlink to nothing), else None."""
    if path.exists():
        return None
    if path.is_symlink():
        return f"is a symlink to {printable(os.readlink(path))}, which does not exist"
    return "no such file"


def _regular_file(path: Path) -> os.stat_result:
    """The stat of a regular file; ValueError naming what `path` is otherwise."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ValueError("no such file") from None
    except OSError as exc:
        raise ValueError(f"cannot read: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"is {file_kind(info.st_mode)}, not a regular file")
    return info


@contextmanager
def open_regular(path: Path) -> Iterator[tuple[BinaryIO, int]]:
    """(handle, size) of a regular file opened for reading, the one way the project opens a
    file a user gives; ValueError naming what it is otherwise. A FIFO, device or socket is
    refused from its `stat` before any open, and the file is opened without blocking and
    checked again by `fstat`, so one swapped in between is refused too, never waited on."""
    _regular_file(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ValueError(f"cannot read: {exc.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ValueError(f"is {file_kind(info.st_mode)}, not a regular file")
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as handle:
        yield handle, info.st_size


def read_bytes(path: Path, most: int | None = None, variable: str = "file_bytes") -> bytes:
    """A regular file's bytes, at most `most` (default RAGEVAL_MAX_FILE_BYTES; `variable`
    names the limit that raises it); ValueError otherwise."""
    with open_regular(path) as (handle, size):
        return _capped(handle, size, most, variable)


def _limit(variable: str) -> int:
    """The byte limit `variable`: its default while no `RAGEVAL_MAX_*` variable is set (no
    settings model to load, so reading a run needs no pydantic: `file_defaults`), else the
    settings' value, checked."""
    default = file_defaults.byte_limit_default(variable)
    return getattr(file_limits(), variable) if default is None else default


def _capped(handle: BinaryIO, size: int, most: int | None, variable: str) -> bytes:
    """The rest of an open file of `size` bytes, refused past `most` before it is read. One
    read of the size `fstat` gave: no second copy, as joining pieces would make."""
    most = _limit(variable) if most is None else most
    if size > most:
        hint = file_limits().hint(variable)
        raise ValueError(f"is {size} bytes, over the limit of {most}{hint}")
    try:
        data = handle.read(size - handle.tell() + 1)
    except OSError as exc:
        raise ValueError(f"cannot read: {exc.strerror}") from None
    if handle.tell() > size:
        raise ValueError("grew while it was read: read it again once it is written")
    return data


def read_text(path: Path) -> str:
    """`read_bytes` decoded as UTF-8; ValueError when it is not UTF-8."""
    try:
        return read_bytes(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"is not UTF-8 text (byte {exc.start})") from None


def input_bytes(
    path: str | Path, most: str = "data_bytes", inflated: str = "decompressed_bytes"
) -> tuple[Path, bytes]:
    """A data file's bytes, gunzipped when gzip, or InputError naming what is wrong with it.
    The file is at most the limit `most` on disk (RAGEVAL_MAX_DATA_BYTES for a run or qrels)
    and, gzipped, decompresses to at most `inflated` (RAGEVAL_MAX_DECOMPRESSED_BYTES), counted
    while it is decompressed piece by piece: a gzip bomb stops at the cap having held about the
    cap in memory. Needs no numpy or pyarrow: `rageval eval` reads a run with it while those
    import."""
    path = Path(path)
    try:
        with open_regular(path) as (handle, size):
            if handle.read(2) != b"\x1f\x8b":
                handle.seek(0)
                return path, _capped(handle, size, None, most)
            handle.seek(0)
            if size > _limit(most):
                _capped(handle, size, None, most)  # (refuses)
            return path, _gunzipped(handle, file_limits(), inflated)
    except InputError:
        raise  # (a bad limit in the environment: named as such)
    except ValueError as exc:
        raise InputError(path, str(exc)) from None


def _gunzipped(handle: BinaryIO, limits: FileLimits, inflated: str) -> bytes:
    """A gzip stream's content, decompressed 1 MiB at a time into one growing buffer."""
    most = getattr(limits, inflated)
    out = io.BytesIO()
    try:
        with gzip.GzipFile(fileobj=handle) as unzipped:
            while out.tell() <= most and (
                piece := unzipped.read(min(1 << 20, most + 1 - out.tell()))
            ):
                out.write(piece)
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"is not a valid gzip file ({exc})") from None
    if out.tell() > most:
        raise ValueError(f"decompresses to more than {most} bytes{limits.hint(inflated)}")
    return out.getvalue()


def confined(folder: Path, name: str, *, exists: bool = True) -> Path:
    """The regular file `name` names inside `folder`, resolved; ValueError when it is absolute,
    leaves the folder (through `..` or a symlink) or is not a regular file. With
    `exists=False` a file that is not there yet passes (it is checked again when read)."""
    if Path(name).is_absolute() or name.startswith("\\"):
        raise ValueError(
            f"must be a path relative to the file's folder, not absolute (got {quote_json(name)})"
        )
    root = folder.resolve()
    lexical = Path(os.path.normpath(root / name))
    if not lexical.is_relative_to(root):
        raise ValueError(f"leaves the file's folder through '..' (got {quote_json(name)})")
    target = lexical.resolve()
    if not target.is_relative_to(root):
        raise ValueError(
            f"is a symlink to a file outside the file's folder, {printable(str(target))} "
            f"(got {quote_json(name)})"
        )
    if not exists and not target.exists():
        return target
    try:
        _regular_file(target)
    except ValueError as exc:
        raise ValueError(f"{exc} (got {quote_json(name)})") from None
    return target

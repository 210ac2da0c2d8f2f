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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rageval_pipeline.core.errors import InputError

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


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _regular_file(path: Path) -> os.stat_result:
    """The stat of a regular file; ValueError naming what `path` is otherwise."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ValueError("no such file") from None
    except OSError as exc:
        raise ValueError(f"cannot read: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"is {_kind(info.st_mode)}, not a regular file")
    return info


def read_bytes(path: Path) -> bytes:
    """A regular file's bytes, at most RAGEVAL_MAX_FILE_BYTES; ValueError otherwise."""
    limits = file_limits()
    most = limits.file_bytes
    size = _regular_file(path).st_size
    if size > most:
        raise ValueError(f"is {size} bytes, over the limit of {most}{limits.hint('file_bytes')}")
    chunks: list[bytes] = []
    read = 0
    try:
        with path.open("rb") as handle:
            # In chunks, not read(most + 1): that would allocate the whole limit up front.
            while read <= most and (chunk := handle.read(min(1 << 20, most + 1 - read))):
                chunks.append(chunk)
                read += len(chunk)
    except OSError as exc:
        raise ValueError(f"cannot read: {exc.strerror}") from None
    if read > most:
        raise ValueError(f"is over the limit of {most} bytes{limits.hint('file_bytes')}")
    return b"".join(chunks)


def read_text(path: Path) -> str:
    """`read_bytes` decoded as UTF-8; ValueError when it is not UTF-8."""
    try:
        return read_bytes(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"is not UTF-8 text (byte {exc.start})") from None


def input_bytes(path: str | Path) -> tuple[Path, bytes]:
    """A data file's bytes (gunzipped when gzip), or InputError naming what is wrong with it.
    Needs no numpy or pyarrow: `rageval eval` reads a run with it while those import."""
    path = Path(path)
    if path.is_dir():
        raise InputError(path, "is a directory, not a file")
    if not path.exists():
        raise InputError(path, "no such file")
    if not path.is_file():
        raise InputError(path, "is not a regular file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(path, f"cannot be read ({exc.strerror})") from None
    if data[:2] != b"\x1f\x8b":
        return path, data
    limits = file_limits()
    most = limits.decompressed_bytes
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as handle:
            data = handle.read(most + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(path, f"is not a valid gzip file ({exc})") from None
    if len(data) > most:
        raise InputError(
            path, f"decompresses to more than {most} bytes{limits.hint('decompressed_bytes')}"
        )
    return path, data


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
            f"is a symlink to a file outside the file's folder (got {quote_json(name)})"
        )
    if not exists and not target.exists():
        return target
    try:
        _regular_file(target)
    except ValueError as exc:
        raise ValueError(f"{exc} (got {quote_json(name)})") from None
    return target

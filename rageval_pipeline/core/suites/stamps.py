"""Stamps of the files a suite was read from: path, size and modification time, as JSON keeps
them. The one rule both shortcuts past parsing a suite trust: `golden.load_suite`'s parse
cache in the process and the dataset partitions' validation record on disk (defs/partitions.py)
keep a suite while every file it was read from keeps its stamp."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

# A file changed less than this long ago is not trusted (see `settled`).
SETTLED_NS = 1_000_000_000

Stamp = list  # [path, size, mtime_ns]


def stamp(file: Path) -> Stamp:
    """A file's path, size and modification time; OSError when it cannot be read."""
    stat = file.stat()
    return [str(file), stat.st_size, stat.st_mtime_ns]


def stamps(files: Iterable[Path]) -> list[Stamp] | None:
    """The stamp of each file; None when one is gone."""
    try:
        return [stamp(file) for file in files]
    except OSError:
        return None


def hold(stamped: Iterable[Stamp]) -> bool:
    """Whether every file listed keeps the size and modification time listed with it."""
    try:
        return all(stamp(Path(entry[0])) == list(entry) for entry in stamped)
    except (OSError, TypeError, IndexError):
        return False


def settled(stamped: Iterable[Stamp]) -> bool:
    """Whether no file changed in the last second: one rewritten at once with the same size may
    keep its time (git's "racily clean" entries), so a fresh one is not trusted."""
    since = time.time_ns() - SETTLED_NS
    return all(mtime < since for _, _, mtime in stamped)

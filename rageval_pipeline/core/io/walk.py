"""The files of a folder a user gives (`rageval suite init DOCS`), confined to it and bounded.

Nothing outside the folder is read: a symlink whose target lies outside it (a file, a folder,
`/proc/self/environ`, a dangling link pointing out) is refused with one line naming the link
and its target, unless the caller follows links on the user's explicit word (`--follow-links`),
and then each one followed is said. A symlink to a folder inside is not entered (its files are
read at their own place, and a link loop cannot turn the walk into an endless one). A FIFO,
device or socket is refused from its `stat`, never opened. Hidden entries (a name starting
with `.`) are not looked into. The walk stops with one line past RAGEVAL_MAX_FOLDER_FILES
files and folders (entries: a folder is not listed further than that) or
RAGEVAL_MAX_FOLDER_BYTES bytes of wanted files, before anything is read, and says how far it
got every few seconds on a long walk.
"""

from __future__ import annotations

import itertools
import os
import re
import stat
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import NamedTuple

from rageval_pipeline.core.errors import InputError, printable
from rageval_pipeline.core.io.bounds import absent, file_kind, file_limits, read_bytes

_SURROGATE = re.compile("[\ud800-\udfff]")
PROGRESS_S = 2.0  # a long walk or conversion says how far it got this often


class Found(NamedTuple):
    """A regular file of the folder: its path there (a followed link's own path), its path
    relative to the folder (POSIX) and its size."""

    path: Path
    relative: str
    size: int


class Walked(NamedTuple):
    root: Path  # the folder, resolved
    follow_links: bool
    wanted: list[Found]  # files with one of the wanted suffixes, by relative path
    other: list[str]  # relative paths of the other files
    notes: list[str]  # links followed or not entered, broken links: one line each

    def read(self, found: Found) -> bytes:
        """A found file's bytes (RAGEVAL_MAX_FILE_BYTES), its link resolved again: one
        retargeted out of the folder since the walk is refused as the walk would have."""
        real = found.path.resolve()
        if not self.follow_links and not real.is_relative_to(self.root):
            raise InputError(found.path, f"is a symlink to {printable(str(real))}: refused")
        try:
            return read_bytes(real)
        except ValueError as exc:
            raise InputError(found.path, str(exc)) from None


class Progress:
    """Calls `log` with a line at most every PROGRESS_S seconds (never when `log` is None)."""

    def __init__(self, log: Callable[[str], None] | None) -> None:
        self.log, self.last = log, time.monotonic()

    def __call__(self, line: Callable[[], str]) -> None:
        if time.monotonic() - self.last >= PROGRESS_S:
            self.say(line())

    def say(self, line: str) -> None:
        """`line` now (a long step about to start)."""
        if self.log is not None:
            self.last = time.monotonic()
            self.log(line)


class Deadline:
    """The time reading a folder's documents may take (RAGEVAL_MAX_READ_S), from now: each
    document and each PDF page checks it before it starts, so one slow page (pypdf inflates a
    stream up to its own 75 MB cap) is the most it is overrun by."""

    def __init__(self) -> None:
        self.limits = file_limits()
        self.end = time.monotonic() + self.limits.read_s

    def check(self, path: Path) -> None:
        if time.monotonic() > self.end:
            problem = f"not read: reading the folder took over {self.limits.read_s:g} s"
            raise InputError(path, problem + self.limits.hint("read_s"))


def walk(
    folder: Path,
    suffixes: Collection[str],
    *,
    follow_links: bool = False,
    log: Callable[[str], None] | None = None,
) -> Walked:
    """Every regular file under `folder`, confined and bounded as the module says; the
    InputError of the first refused entry otherwise."""
    root = _root(folder)
    limits = file_limits()
    most = limits.folder_files
    wanted, other, notes = [], [], []
    total = looked = 0
    progress = Progress(log)
    seen = {root}
    stack = [(folder, "")]
    while stack:
        directory, prefix = stack.pop()
        entries = _listed(directory, most + 1 - looked)
        if looked + len(entries) > most:
            raise InputError(folder, f"holds more than {most} files{limits.hint('folder_files')}")
        for entry in entries:
            if entry.name.startswith("."):
                continue
            looked += 1
            progress(
                lambda n=looked: (
                    f"looked at {n:,} files and folders, {len(wanted)} document(s) so far"
                )
            )
            path, relative = Path(entry.path), prefix + entry.name
            info = _followed(folder, root, path, relative, follow_links, notes)
            if info is None:
                continue
            if stat.S_ISDIR(info.st_mode):
                real = Path(os.path.realpath(path))
                if entry.is_symlink() and (real.is_relative_to(root) or real in seen):
                    notes.append(f"left out {printable(relative)}: a link to a folder read already")
                    continue
                seen.add(real)
                stack.append((path, relative + "/"))
                continue
            if not stat.S_ISREG(info.st_mode):
                raise InputError(path, f"is {file_kind(info.st_mode)}, not a regular file: refused")
            if Path(entry.name).suffix.lower() not in suffixes:
                other.append(relative)
                continue
            if _SURROGATE.search(relative):  # bytes that are not UTF-8, kept as surrogates
                raise InputError(path, "has a name that is not UTF-8 text: rename it")
            total += info.st_size
            if total > limits.folder_bytes:
                problem = f"holds more than {limits.folder_bytes} bytes of documents"
                raise InputError(folder, problem + limits.hint("folder_bytes"))
            wanted.append(Found(path, relative, info.st_size))
    wanted.sort(key=lambda f: f.relative)
    return Walked(root, follow_links, wanted, sorted(other), notes)


def _listed(directory: Path, most: int) -> list[os.DirEntry]:
    """A folder's entries, by name, at most `most` of them read (a folder of millions of
    entries is not listed whole to be refused)."""
    try:
        with os.scandir(directory) as listing:
            entries = list(itertools.islice(listing, max(most, 0)))
    except OSError as exc:
        raise InputError(directory, f"cannot be listed ({exc.strerror})") from None
    return sorted(entries, key=lambda e: e.name, reverse=True)


def _root(folder: Path) -> Path:
    """The folder, resolved; one line when it is missing, a dangling link or not a folder."""
    try:
        info = folder.stat()
    except FileNotFoundError:
        raise InputError(folder, absent(folder) or "no such folder") from None
    except OSError as exc:
        raise InputError(folder, f"cannot be read ({exc.strerror})") from None
    if not stat.S_ISDIR(info.st_mode):
        raise InputError(folder, f"is {file_kind(info.st_mode)}, not a folder")
    return folder.resolve()


def _followed(
    folder: Path, root: Path, path: Path, relative: str, follow: bool, notes: list[str]
) -> os.stat_result | None:
    """The stat of an entry, through its link when it is one that may be read; None for a
    broken link inside the folder (noted). A link out of the folder is refused, or with
    `follow` noted and read."""
    try:
        info = path.lstat()
    except OSError as exc:
        raise InputError(path, f"cannot be read ({exc.strerror})") from None
    if not stat.S_ISLNK(info.st_mode):
        return info
    target = Path(os.path.realpath(path))
    written = printable(os.readlink(path))  # the target as the link names it
    shown = f"{printable(relative)} -> {written}"
    inside = target.is_relative_to(root)
    if not inside and not follow:
        raise InputError(
            path,
            f"is a symlink to {written}, outside {printable(str(folder))}: "
            "refused (nothing is read from outside the folder; --follow-links reads it)",
        )
    try:
        info = target.stat()
    except OSError:
        notes.append(f"left out {shown}: a broken link")
        return None
    if not inside:
        notes.append(f"followed {shown} out of the folder (--follow-links)")
    return info

"""Coordination between processes through `flock`.

The warehouse's write lock (`held`): an exclusive `flock` on a file beside the database that
names its holder, so that a writer kept waiting says whom it waits for, and gives up after a
bounded wait. And the marks of atomic writes in progress (`claim`): each holds a `flock` on its
own temp file or folder, so that the next write to the folder can tell the leftovers of killed
writes (`sweep_orphans`) from writes still going on in other processes.

A temp entry's name also says who writes it (`writer_tag`: pid and `space`, the kernel boot and
PID namespace), so a killed writer's leftovers go at the very next write to the folder, however
young: its pid is gone from this space. Any other unlocked entry waits ORPHAN_AGE_S, as its
writer may not have taken its `flock` yet.

The kernel drops a `flock` when its holder exits, however it dies (SIGKILL, OOM, node loss
aside), so a killed writer never leaves the lock taken. The holder line stays in the file until
the next holder overwrites it; it is only read while the lock is taken, that is, by a live
process.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import logging
import os
import re
import shutil
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

log = logging.getLogger(__name__)
REPORT_EVERY_S = 30.0  # a waiting writer names the holder this often
POLL_S = 0.2  # how often a waiting writer tries the lock again: a sleep, not a busy loop
_TEMP = (".tmp", ".old")  # endings of atomic writes' temp entries (core.storage.warehouse)
ORPHAN_AGE_S = 60.0  # a temp entry younger than this may not be claimed by its writer yet
_WRITER = re.compile(r"\.(\d+)-([0-9a-f]{12})\.[^./]+\.(?:tmp|old)$")  # writer_tag in a temp name


@functools.cache
def space() -> str:
    """Where a pid means this process's pid: a digest of the kernel's boot id and this PID
    namespace (Linux's /proc); "" where they cannot be read (then no pid is judged). Host names
    do not tell machines apart (pods with host networking, cloned VMs)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""
    return hashlib.sha256(f"{boot} {namespace}".encode()).hexdigest()[:12]


def writer_tag() -> str:
    """`<pid>-<space>`: put in a temp entry's name, it lets `sweep_orphans` tell at once that
    its writer is dead."""
    return f"{os.getpid()}-{space() or '0' * 12}"


def _writer_gone(name: str) -> bool:
    """Whether the temp entry `name` was written by a process of this space that is gone."""
    match = _WRITER.search(name)
    if match is None or match[2] != space():
        return False
    try:
        os.kill(int(match[1]), 0)
    except ProcessLookupError:
        return True
    except OSError:
        pass
    return False


class Busy(Exception):
    """The lock stayed taken for the whole wait."""

    def __init__(self, holder: str, waited_s: float) -> None:
        super().__init__(holder)
        self.holder, self.waited_s = holder, waited_s


def holder_of(lock_path: Path) -> str:
    """Who holds the lock, as its holder wrote it."""
    try:
        text = lock_path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        text = ""
    return text[:300] or "an unknown process (it wrote no holder line)"


@contextmanager
def held(lock_path: Path, *, owner: str, wait_s: float) -> Iterator[None]:
    """Hold the lock for the block, waiting up to `wait_s` for another holder (logging whom it
    waits for at once and every REPORT_EVERY_S); `Busy` when it stays taken. `owner` says what
    this process is (e.g. a Dagster run), for the messages of writers that wait for it."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not claim(fd):
            start = time.monotonic()
            reported = None
            while not claim(fd):
                waited = time.monotonic() - start
                if waited > wait_s:
                    raise Busy(holder_of(lock_path), waited)
                if reported is None or waited - reported >= REPORT_EVERY_S:
                    reported = waited
                    log.warning(
                        "%s: waiting %.0f s so far (gives up after %g s) for the write lock "
                        "held by %s",
                        lock_path,
                        waited,
                        wait_s,
                        holder_of(lock_path),
                    )
                time.sleep(POLL_S)
        since = datetime.now(UTC).isoformat(timespec="seconds")
        about = f" ({owner})" if owner else ""
        line = f"pid {os.getpid()} on {socket.gethostname()}{about} since {since}\n"
        os.ftruncate(fd, 0)
        os.pwrite(fd, line.encode(), 0)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def claim(fd: int) -> bool:
    """Take the `flock` that marks a temp entry as being written (False: someone holds it, or
    the file system has no flock: then it counts as held)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def sweep_orphans(folder: Path) -> None:
    """Remove the temp files and folders (`.<name>.*.tmp`, `.<name>.*.old`) that killed writes
    left in `folder`: each live write holds a `flock` on its own, and one younger than
    ORPHAN_AGE_S may not hold it yet, so only unlocked ones go that are old or whose writer
    (named in them) is gone."""
    try:
        entries = [e for e in os.scandir(folder) if e.name.startswith(".") and e.name[-4:] in _TEMP]
    except OSError:
        return
    for entry in entries:
        try:
            young = time.time() - entry.stat(follow_symlinks=False).st_mtime < ORPHAN_AGE_S
            if young and not _writer_gone(entry.name):
                continue
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            if claim(fd):
                log.info("%s: removing what an interrupted write left", entry.path)
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    Path(entry.path).unlink(missing_ok=True)
        finally:
            os.close(fd)

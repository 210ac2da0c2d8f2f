"""A digest of the hardware latency is timed on: milliseconds from two machines never compare."""

from __future__ import annotations

import hashlib
import os
import platform
from functools import cache


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as lines:
            return next(
                (ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")), ""
            )
    except OSError:
        return platform.processor()


def _memory_gib() -> int:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)
    except (ValueError, OSError, AttributeError):
        return 0


@cache
def machine_digest() -> str:
    """Architecture, CPU model, core count and memory (GiB): what decides a query's speed.
    The host name is left out, so identical CI machines share a digest."""
    parts = [platform.machine(), _cpu_model(), str(os.cpu_count()), str(_memory_gib())]
    return hashlib.sha256("|".join(parts).encode("utf-8")).hexdigest()[:16]

"""The process environment itself: the one module that touches `os.environ`.

The settings groups (`base.EnvGroup` and its subclasses) read their variables through
pydantic-settings; this module holds what a typed model cannot: variables whose names a user
file gives (`headers_from_env` in systems.yaml) and variables set for libraries that read them
at import. It imports no pydantic, so the CLI and the retrieval code may use it at no cost.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager


def variables() -> Mapping[str, str]:
    """The process environment, read-only for callers."""
    return os.environ


def named(name: str) -> str | None:
    """The value of a variable named at run time (by a user file), or None when unset."""
    return os.environ.get(name)


def set_default(name: str, value: str) -> None:
    """Set `name` for this process and its children unless the user already set it."""
    os.environ.setdefault(name, value)


@contextmanager
def default_during(name: str, value: str) -> Iterator[None]:
    """`name` set to `value` inside the block unless the user set it; removed after."""
    if name in os.environ:
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        del os.environ[name]

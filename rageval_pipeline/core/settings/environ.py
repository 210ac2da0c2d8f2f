"""The process environment itself: the one module that touches `os.environ`.

The settings groups (`base.EnvGroup` and its subclasses) take their variables from `present`
and type them with pydantic-settings; this module also holds what a typed model cannot hold:
variables whose names a user file gives (`headers_from_env` in systems.yaml) and variables set
for libraries that read them at import. It imports no pydantic, so the CLI and the retrieval
code may use it at no cost.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager


def present(
    names: Iterable[str], env: Mapping[str, str] | None = None
) -> tuple[tuple[str, str], ...]:
    """`(name, value)` of each of `names` set in the process environment (or in `env`)."""
    source = os.environ if env is None else env
    values = ((name, source.get(name)) for name in names)
    return tuple((name, value) for name, value in values if value is not None)


def named(name: str) -> str | None:
    """The value of a variable named at run time (by a user file), or None when unset."""
    return os.environ.get(name)


def set_default(name: str, value: str) -> None:
    """Set `name` for this process and its children unless the user already set it."""
    os.environ.setdefault(name, value)


def any_named(prefix: str) -> bool:
    """Whether any variable whose name starts with `prefix` is set."""
    return any(name.startswith(prefix) for name in os.environ)


@contextmanager
def defaults_meanwhile(values: Mapping[str, str]) -> Iterator[None]:
    """`set_default` of each of `values` while the block runs; afterwards each variable is as
    it was (a process that runs more than one command, as tests do, keeps its own)."""
    saved = {name: os.environ.get(name) for name in values}
    for name, value in values.items():
        os.environ.setdefault(name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

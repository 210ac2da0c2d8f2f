"""The process environment itself: the one module that touches `os.environ`.

The settings groups (`base.EnvGroup` and its subclasses) take their variables from `present`
and type them with pydantic-settings; this module also holds what a typed model cannot hold:
variables whose names a user file gives (`headers_from_env` in systems.yaml) and variables set
for libraries that read them at import. It imports no pydantic, so the CLI and the retrieval
code may use it at no cost.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping


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


# Not settings (no one sets them by hand): what a process established for its children, e.g.
# that the bundled suites were validated when a code location loaded its definitions, so its
# run and step processes (children that load the same definitions) need not do it again.
_HANDED_DOWN = "RAGEVAL_PROCESS_"


def handed_down(name: str) -> str | None:
    """What a parent process handed down under `name`, or None."""
    return os.environ.get(_HANDED_DOWN + name)


def hand_down(name: str, value: str) -> None:
    """Hand `value` down to this process's children under `name`."""
    os.environ[_HANDED_DOWN + name] = value

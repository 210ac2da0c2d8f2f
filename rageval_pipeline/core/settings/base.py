"""The base of every settings group: typed fields read from `{PREFIX}{FIELD}` by pydantic-settings.

A group lists its variables as fields with a type, a default and a description (the table in
docs/configuration.md is generated from them). `Group.from_env()` reads the environment when
called, never at import, so a variable changed after import (a test, a long-lived process)
applies at once. A value set in the environment wins over the defaults a caller passes (the
`timeout_s` of a systems.yaml entry, say), as the variables are the operator's override.

A bad value is one `InputError` naming the variable and pydantic's rule, e.g. `environment:
RAGEVAL_MAX_DEPTH: Input should be greater than or equal to 1`; the value itself is never
shown (keys are values too), but for a folder given as a URL, which is shown without its
credentials (`folders`). Only the exact upper-case names are read.

Every variable starts with `RAGEVAL_`. A group whose variables once had another prefix lists it
in `renamed` (new prefix to old): an old name is still read as the new one for one release,
the new one winning when both are set, and warns once per process (`RenamedVariableWarning`).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, ClassVar, Self

from pydantic import PrivateAttr, ValidationError
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict
from pydantic_settings.sources.utils import parse_env_vars

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.settings import environ

# The variables one `from_env` reads (those with the group's prefix), for the length of the call.
_GIVEN: ContextVar[Mapping[str, str] | None] = ContextVar("rageval_settings_env", default=None)
# The old names already warned about in this process.
_WARNED: set[str] = set()


class RenamedVariableWarning(FutureWarning):
    """An old variable name was read (a `FutureWarning`, so Python shows it by default)."""


class EnvGroup(BaseSettings):
    """Settings of one concern. Built directly (`NetLimits(deadline_s=5)`) a group with no
    prefix is its defaults and arguments only; `from_env` reads the environment."""

    # Empty values are values (an empty limit is refused); groups that treat "" as unset say so.
    # NaN and infinities are no limit (`nan` passes every comparison): refused in every group.
    model_config = SettingsConfigDict(
        frozen=True, extra="forbid", env_prefix="", allow_inf_nan=False
    )

    # New prefix -> the prefix its variables had before, read as a deprecated alias.
    renamed: ClassVar[Mapping[str, str]] = {}

    _prefix: str = PrivateAttr("")

    def __init__(self, _env_prefix: str | None = None, **values: Any) -> None:
        prefix = self.model_config.get("env_prefix", "") if _env_prefix is None else _env_prefix
        super().__init__(_env_prefix=prefix, **values)
        self._prefix = prefix

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings, **_):
        """The environment over the caller's values; no .env file nor secrets folder. A group
        without a prefix reads nothing (it would read bare names such as `ATTEMPTS`)."""
        if not isinstance(env_settings, EnvSettingsSource) or not env_settings.env_prefix:
            return (init_settings,)
        given = _GIVEN.get()
        if given is not None:  # else (built directly) pydantic-settings reads the process
            env_settings.env_vars = parse_env_vars(
                given,
                env_settings.case_sensitive,
                env_settings.env_ignore_empty,
                env_settings.env_parse_none_str,
            )
        return env_settings, init_settings

    @classmethod
    def from_env(
        cls, prefix: str | None = None, *, env: Mapping[str, str] | None = None, **defaults: Any
    ) -> Self:
        """The group from `defaults`, each overridden by `{prefix}_{FIELD}` when set (`prefix`
        defaults to the group's own). `env` replaces the process environment (tests, code
        versions). A bad value is an `InputError` naming the variable."""
        env_prefix = cls.model_config.get("env_prefix", "") if prefix is None else f"{prefix}_"
        names = [f"{env_prefix}{name}".upper() for name in cls.model_fields]
        given = environ.present(names, env) if env_prefix else ()
        old_prefix = cls.renamed.get(env_prefix)
        if old_prefix:
            given = _with_old_names(given, env_prefix, old_prefix, names, env)
        return cls._built(env_prefix, given, tuple(sorted(defaults.items())))

    @classmethod
    @functools.lru_cache(maxsize=256)
    def _built(cls, env_prefix: str, given: tuple[tuple[str, str], ...], defaults: tuple) -> Self:
        """The group for these variables and defaults: built once per distinct set, as
        pydantic-settings takes milliseconds (a suite reads a file per document, each under
        the file limits). Groups are frozen, so sharing one is safe."""
        token = _GIVEN.set(dict(given))
        try:
            return cls(_env_prefix=env_prefix, **dict(defaults))
        except ValidationError as exc:
            first = exc.errors()[0]
            name = str(first["loc"][0])
            variable = f"{env_prefix}{name}".upper()
            ignore_empty = cls.model_config.get("env_ignore_empty")
            named = any(k == variable and (v or not ignore_empty) for k, v in given)
            raise InputError(
                "environment", first["msg"], field=variable if named else name
            ) from None
        finally:
            _GIVEN.reset(token)

    def variable(self, name: str) -> str | None:
        """The variable that sets field `name` (`RAGEVAL_MAX_DEPTH`), None without a prefix."""
        return f"{self._prefix}{name}".upper() if self._prefix else None

    def hint(self, name: str) -> str:
        """` (RAGEVAL_X_FIELD)`: where the user changes field `name`, for error messages."""
        variable = self.variable(name)
        return f" ({variable})" if variable else ""


def _with_old_names(
    given: tuple[tuple[str, str], ...],
    prefix: str,
    old_prefix: str,
    names: list[str],
    env: Mapping[str, str] | None,
) -> tuple[tuple[str, str], ...]:
    """`given` with each old name set read as its new name (the new one wins when both are
    set); the first read of each old name warns."""
    new_of = {old_prefix + name.removeprefix(prefix): name for name in names}
    set_new = dict(given)
    for old, value in environ.present(new_of, env):
        new = new_of[old]
        if old not in _WARNED:
            _WARNED.add(old)
            ignored = " (ignored: that is set too)" if new in set_new else ""
            warnings.warn(
                f"{old} is deprecated and will stop being read: set {new} instead{ignored}",
                RenamedVariableWarning,
                stacklevel=3,
            )
        set_new.setdefault(new, value)
    return tuple(sorted(set_new.items()))

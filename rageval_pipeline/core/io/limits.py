"""Limits that the environment can override: one base class, so every bound in the project is
documented in one place (docs/limits.md) and changed the same way.

A subclass lists its limits as pydantic fields with defaults and bounds; `from_env(prefix)`
builds it with each field overridden by the variable `{prefix}_{FIELD}` (upper case) when set.
A bad value is an `InputError` naming the variable; limit values are not secrets.

`FileLimits` lives here rather than beside its users in `bounds`, so that reading a data file
(`bounds.input_bytes`) needs no pydantic; the other families live in their modules.
"""

from __future__ import annotations

import os
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rageval_pipeline.core.errors import InputError


class EnvLimits(BaseModel):
    """Base of a family of limits; `env_prefix` is where they were read from (for messages)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    env_prefix: str = Field("", exclude=True)

    @classmethod
    def from_env(cls, prefix: str, **defaults: Any) -> Self:
        """Limits from `defaults`, each overridden by the variable `{prefix}_{FIELD}` if set."""
        values: dict[str, Any] = dict(defaults)
        for name in cls.model_fields:
            variable = f"{prefix}_{name.upper()}"
            if name != "env_prefix" and variable in os.environ:
                values[name] = os.environ[variable]
        try:
            return cls(**values, env_prefix=prefix)
        except ValidationError as exc:
            first = exc.errors()[0]
            variable = f"{prefix}_{str(first['loc'][0]).upper()}"
            source = variable if variable in os.environ else str(first["loc"][0])
            raise InputError("environment", first["msg"], field=source) from None

    def hint(self, name: str) -> str:
        """` (RAGEVAL_X_FIELD)`: where the user changes limit `name`, for error messages."""
        return f" ({self.env_prefix}_{name.upper()})" if self.env_prefix else ""


class FileLimits(EnvLimits):
    """Bounds on a file a user writes and on quoting its values; `RAGEVAL_MAX_*`."""

    file_bytes: int = Field(64 << 20, ge=1, description="bytes in one file")
    depth: int = Field(64, ge=1, description="levels of nested objects and arrays")
    yaml_alias_nodes: int = Field(10_000, ge=1, description="nodes YAML aliases expand to")
    quote_chars: int = Field(200, ge=1, description="characters of a value quoted in an error")

"""Every settings group and the prefix it is read with, and the table of docs/configuration.md
generated from them: `python -m rageval_pipeline.core.settings --markdown`."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from pydantic.fields import FieldInfo

from rageval_pipeline.core.settings.base import EnvGroup
from rageval_pipeline.core.settings.limits import (
    BEIR_DOWNLOAD,
    BEIR_DOWNLOAD_DEFAULTS,
    HTTP_SEARCH,
    HTTP_SEARCH_DEFAULTS,
    LLM,
    LLM_DEFAULTS,
    ArchiveLimits,
    FileLimits,
    NetLimits,
    ObjectStoreLimits,
    WarehouseLimits,
)
from rageval_pipeline.core.settings.locations import Deployment, Locations
from rageval_pipeline.core.settings.providers import GenerationScope, Labelling, Providers

DOC = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


@dataclass(frozen=True)
class Family:
    """A group read under one prefix; `defaults` are the ones its user passes, `shown` the
    default column where a value comes from elsewhere."""

    group: type[EnvGroup]
    prefix: str
    title: str
    about: str
    defaults: Mapping[str, Any] = field(default_factory=dict)
    shown: Mapping[str, str] = field(default_factory=dict)

    def variables(self) -> list[tuple[str, FieldInfo, str]]:
        """(variable, field, default shown) of each field, in the group's order."""
        return [
            (f"{self.prefix}_{name}".upper(), info, self._default(name, info))
            for name, info in self.group.model_fields.items()
        ]

    def _default(self, name: str, info: FieldInfo) -> str:
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if name in self.shown or "shown" in extra:
            return str(self.shown.get(name) or extra["shown"])
        return _value(self.defaults.get(name, info.default))


FAMILIES: tuple[Family, ...] = (
    Family(
        Locations,
        "RAGEVAL",
        "Folders and hosts",
        "Read on each use. The folders are local paths, except the storage folder, which may "
        "be an object-store URL (`s3://bucket/eval` with s3fs; `gs://` is refused; "
        "docs/deploy.md, Object storage). Any other URL is refused with one line, never taken "
        "for a local folder.",
    ),
    Family(
        Deployment,
        "RAGEVAL",
        "Deployment",
        "Read when the definitions load (docs/deploy.md).",
    ),
    Family(
        FileLimits,
        "RAGEVAL_MAX",
        "Limits on files a user writes",
        'Read on each load (docs/limits.md, "Limits on user files").',
    ),
    Family(ArchiveLimits, "RAGEVAL_ARCHIVE", "Archive limits", "Zip bombs (docs/limits.md)."),
    Family(
        WarehouseLimits,
        "RAGEVAL_WAREHOUSE",
        "Warehouse waits",
        "How long DuckDB readers and writers queue (docs/deploy.md).",
    ),
    Family(
        ObjectStoreLimits,
        "RAGEVAL_S3",
        "Object storage calls",
        "Timeouts and tries of each call to an s3:// storage folder (docs/limits.md).",
    ),
    Family(
        NetLimits,
        BEIR_DOWNLOAD,
        "BEIR download",
        "Network limits of the BEIR archive download (docs/limits.md).",
        BEIR_DOWNLOAD_DEFAULTS,
    ),
    Family(
        NetLimits,
        HTTP_SEARCH,
        "HTTP search systems",
        "Network limits of `http` systems (docs/systems.md); they override the entry's own.",
        HTTP_SEARCH_DEFAULTS,
        {
            "deadline_s": "the entry's `timeout_s` (`30`)",
            "attempts": "the entry's `retries` (`3`)",
        },
    ),
    Family(
        Providers,
        "RAGEVAL",
        "LLM providers",
        "The answering model and the judge (docs/generation.md). Any of `RAGEVAL_PROVIDER`, "
        "`RAGEVAL_<PROVIDER>_MODEL`, `RAGEVAL_JUDGE_PROVIDER` or `RAGEVAL_JUDGE_MODEL` set "
        "turns the generation group on. Keys are secrets: never logged or shown.",
    ),
    Family(GenerationScope, "RAGEVAL", "Generation scope", "Which systems answer."),
    Family(Labelling, "RAGEVAL", "LLM labels", "`rageval label` (docs/synthetic.md)."),
    Family(
        NetLimits,
        LLM,
        "LLM transport",
        "Network limits of the provider clients (docs/generation.md).",
        LLM_DEFAULTS,
    ),
)

_HEAD = """# Configuration from the environment

Generated from `rageval_pipeline/core/settings` by
`python -m rageval_pipeline.core.settings --markdown > docs/configuration.md`; a test fails when
this file is out of date. Every variable below is a typed field of one settings group
(pydantic-settings), read when it is used, so a change applies to the next read.

- A bad value stops with one line naming the variable and the rule, never the value, e.g.
  `environment: RAGEVAL_MAX_DEPTH: Input should be greater than or equal to 1`.
- Names are upper case, as written here. Where a group says so, an empty variable is unset.
- Secrets (API keys) are held as `SecretStr`: never printed, logged or written to a report.
- Nothing else in `rageval_pipeline/` reads the environment (a test checks it).
- Every name starts with `RAGEVAL_`. The LLM variables were once `RAG_EVAL_*` (the transport
  limits `RAG_EVAL_DEADLINE_S` and the like are now `RAGEVAL_LLM_*`): an old name is still read
  for this release, warns once (`RenamedVariableWarning`) and loses to the new one when both
  are set.
"""

_TAIL = """## Variables a file names

An `http` system's `headers_from_env` in systems.yaml maps a header to the variable holding its
value (a token, say): whatever its name, it is read when the system is built, checked to be a
valid header value and never shown (docs/systems.md).

## Variables the project sets

| Variable | Value | Why |
| --- | --- | --- |
| `HF_HUB_OFFLINE`, `TRANSFORMERS_OFFLINE` | `1` unless set | weights are never downloaded |
"""


def _value(value: Any) -> str:
    """A default as the table shows it: sizes in MiB or GiB too, no value as `unset`."""
    if value is None or value == "" or value == []:
        return "unset"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, int) and value >= 1 << 20 and value % (1 << 20) == 0:
        unit, size = ("GiB", value >> 30) if value % (1 << 30) == 0 else ("MiB", value >> 20)
        return f"`{value}` ({size} {unit})"
    if isinstance(value, float):
        return f"`{value:g}`"
    if isinstance(value, list):
        return f"`{','.join(value)}`"
    return f"`{value}`"


def _type(annotation: Any) -> str:
    """A field's type in words: what the variable must hold."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return _type(args[0])
    if origin is typing.Annotated:
        return _type(args[0])
    if origin is typing.Literal:
        words = [f"`{a}`" for a in args]
        return ", ".join(words[:-1]) + f" or {words[-1]}"
    if origin is list:
        return "comma-separated names"
    names = {int: "integer", float: "number", bool: "true/false", str: "text"}
    names |= {Path: "path", SecretStr: "secret"}
    return names[annotation]


def markdown() -> str:
    """docs/configuration.md: one table per family, every variable once."""
    parts = [_HEAD]
    for family in FAMILIES:
        empty = " An empty variable counts as unset." if _ignores_empty(family) else ""
        rows = [
            f"| `{variable}` | {_type(info.annotation)} | {default} | {info.description} |"
            for variable, info, default in family.variables()
        ]
        parts.append(
            f"## {family.title}\n\n{family.about}{empty}\n\n"
            "| Variable | Type | Default | Meaning |\n| --- | --- | --- | --- |\n"
            + "\n".join(rows)
            + "\n"
        )
    parts.append(_TAIL)
    return "\n".join(parts)


def _ignores_empty(family: Family) -> bool:
    return bool(family.group.model_config.get("env_ignore_empty"))

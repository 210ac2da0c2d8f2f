"""The `SystemConfig` union and loading a systems file (`SystemsFile`, `load_systems`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from rageval_pipeline.core.io.bounds import confined
from rageval_pipeline.core.io.config import load_model, rule
from rageval_pipeline.core.systems.combined import RerankSystem, RRFSystem, WeightedSystem
from rageval_pipeline.core.systems.external import HttpSystem, PythonSystem, RunFileSystem
from rageval_pipeline.core.systems.indexed import BM25System, DenseSystem

# Dagster names each system's asset group and job after it, and allows only these characters.
_NAME = re.compile(r"^[A-Za-z0-9_]+$")


SystemConfig = Annotated[
    BM25System
    | DenseSystem
    | RRFSystem
    | WeightedSystem
    | RunFileSystem
    | HttpSystem
    | PythonSystem
    | RerankSystem,
    Field(discriminator="retriever"),
]


# --- loading -----------------------------------------------------------------------------


def _system_name(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError("a system name is letters, digits and '_' (e.g. bm25_fixed)")
    return name


class SystemsFile(BaseModel):
    """systems.yaml: `systems: {name: {...}}`; names are set and fusion members resolved here."""

    model_config = ConfigDict(extra="forbid")
    systems: dict[Annotated[str, AfterValidator(_system_name)], SystemConfig]

    @model_validator(mode="after")
    def _wire(self, info: ValidationInfo) -> SystemsFile:
        base_dir = (info.context or {}).get("base_dir", Path())
        for name, system in self.systems.items():
            system._name = name
            if isinstance(system, RunFileSystem):
                try:
                    confined(base_dir, system.path, exists=False)
                except ValueError as exc:
                    raise rule(("systems", name, "path"), str(exc)) from None
                system._base_dir = base_dir
        for name in self.systems:
            self._resolve(name, ())
        return self

    def _resolve(self, name: str, chain: tuple[str, ...]) -> None:
        system = self.systems[name]
        if not system.member_names:
            return
        if name in chain:
            cycle = " -> ".join([*chain, name])
            raise rule(("systems", name, "members"), f"fusion cycle: {cycle}")
        for i, member in enumerate(system.member_names):
            where = ("members", i if isinstance(system, RRFSystem) else member)
            if isinstance(system, RerankSystem):
                where = ("candidates",)
            if member not in self.systems:
                raise rule(("systems", name, *where), f"unknown system {member!r}")
            self._resolve(member, (*chain, name))
            system._members[member] = self.systems[member]


def indexed_system(config: dict | None, name: str) -> SystemConfig | None:
    """A recorded configuration (a baseline's `config`) as a runnable built-in indexed system,
    named `name`; None for other kinds (their members or services are not recorded) or a
    configuration this version cannot read."""
    try:
        system = TypeAdapter(SystemConfig).validate_python(config)
    except ValidationError:
        return None
    if not system.indexed:
        return None
    system._name = name
    return system


def load_systems(path: Path) -> dict[str, SystemConfig]:
    """Every system of a YAML file `systems: {name: {...}}`, fusion members resolved."""
    return load_model(Path(path), SystemsFile, context={"base_dir": Path(path).parent}).systems

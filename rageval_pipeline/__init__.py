"""rageval_pipeline: retrieval evaluation as Dagster assets, with a release gate.

`dagster job execute -m rageval_pipeline` finds `defs` here. It is loaded lazily so that the pure
core (`rageval_pipeline.core`) and the `rageval` CLI import without Dagster.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "defs":
        from rageval_pipeline.definitions import defs

        return defs
    raise AttributeError(name)


def __dir__() -> list[str]:
    return ["defs"]

"""rageval_pipeline: retrieval evaluation as Dagster assets, with a release gate.

`dagster job execute -m rageval_pipeline` finds the code location's `Definitions` here, as
`code_location` (the `defs/` folder loaded by `rageval_pipeline.definitions`). The name is not
`defs`: that is the Dagster layer's package, which the import system binds on this module. It
is loaded lazily so that the pure core (`rageval_pipeline.core`) and the `rageval` CLI import
without Dagster.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "code_location":
        from rageval_pipeline.definitions import defs

        return defs
    raise AttributeError(name)


def __dir__() -> list[str]:
    return ["code_location"]

"""rageval_pipeline: retrieval evaluation as Dagster assets, with a release gate.

`dagster job execute -m rageval_pipeline` finds `defs` here. It is loaded lazily so that the pure
core (`rageval_pipeline.core`) and the `rageval` CLI import without Dagster.
"""

import gc
from typing import Any


def __getattr__(name: str) -> Any:
    if name == "defs":
        # Loading the definitions only creates long-lived objects (modules, classes, schemas);
        # the cyclic collector's full passes over Dagster's whole heap meanwhile find nothing
        # and cost every job start 0.2-0.3 s, so they wait until the load is done.
        enabled = gc.isenabled()
        gc.disable()
        try:
            from rageval_pipeline.definitions import defs
        finally:
            if enabled:
                gc.enable()
        return defs
    raise AttributeError(name)


def __dir__() -> list[str]:
    return ["defs"]

"""The code location's definitions: the `defs/` folder's (`[tool.dg.project]` in pyproject.toml,
which `dg` reads). Bad input met while loading is one line (`defs/failures.py`), not the trace
of Dagster's loader.

Built by the folder's one `@dg.definitions` function rather than through
`dg.components.load_defs`, which adds to them the JSON schema of every installed plugin
component type for the UI's component catalog: this project declares no components, and that
listing cost 55 ms of CPU at every process start (a job, each step process, the webserver's
code server; bench/README.md, "Warm re-run").
"""

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from rageval_pipeline.defs.failures import load_refusal


@contextmanager
def heap_frozen_after_load() -> Iterator[None]:
    """Fast path: no cycle collection while the definitions import and build, then every
    object made so far moved out of the collector's reach (`gc.freeze`). The modules,
    models and definitions live as long as the process, yet each full collection walked
    them again: a warm nfcorpus `evaluate_bm25` spent 0.53 s collecting (0.42 s in five
    full collections), 0.21 s with this, as an empty Dagster job does (bench/README.md,
    "Warm re-run"). What it keeps from the collector: 1,654 unreachable objects left by
    the imports, measured once."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


with heap_frozen_after_load():
    try:
        from rageval_pipeline.defs.definitions import build_definitions

        defs = build_definitions()
    except Exception as exc:
        refused = load_refusal(exc)
        if refused is None:
            raise
        raise refused from None

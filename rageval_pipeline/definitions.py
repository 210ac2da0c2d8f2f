"""The code location's definitions: those of the `defs/` folder's `@dg.definitions` function
(`[tool.dg.project]` in pyproject.toml, which `dg` reads). Bad input met while loading is one
line (`defs/failures.py`), not the trace of Dagster's loader.

The function is called here rather than through `dg.components.load_defs`, which adds the JSON
schema of every installed plugin component type for the UI's component catalog: this project
declares no components, and that listing cost 55 ms of CPU at every process start (a job, each
step process, the webserver's code server).
"""

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def heap_frozen_after_load() -> Iterator[None]:
    """Fast path: no cycle collection while the definitions import and build, then every
    object made so far moved out of the collector's reach (`gc.freeze`). The modules,
    models and definitions live as long as the process, yet each full collection walked
    them again. Side by side on nfcorpus (bench/side_by_side.py), a warm `evaluate_bm25` took
    2.1-2.5 s with this and 3.2-3.7 s without (bench/README.md, "Fifth pass"). What it
    keeps from the collector: the 1,654 unreachable objects the imports left, measured once.
    A process that had the collector off keeps it off."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


with heap_frozen_after_load():
    from rageval_pipeline.defs.failures import load_refusal

    try:
        from rageval_pipeline.defs.definitions import defs as load

        defs = load()
    except Exception as exc:
        refused = load_refusal(exc)
        if refused is None:
            raise
        raise refused from None

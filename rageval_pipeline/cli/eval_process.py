"""The process-level settings of `rageval eval`, a one-shot process that reads two files and
prints a few numbers: each saves work that process would otherwise do for nothing. They are
the CLI's process-level tricks, beside the read-ahead in `score` (bench/README.md, "Fast paths
in one place")."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rageval_pipeline.core.settings import environ

# What the environment would otherwise make the libraries do at import, for a process that
# needs none of it: OpenBLAS (numpy's) starts a thread per core that spins 0.07 s of CPU after
# `import numpy`, taking a core from the run's parse on a 2-core machine (eval does no linear
# algebra worth a thread); pydantic reads every installed package's entry points (0.04 s) for
# plugins that a measure name never needs.
_QUIET = {"OPENBLAS_NUM_THREADS": "1", "PYDANTIC_DISABLE_PLUGINS": "1"}


@contextmanager
def quiet_process() -> Iterator[None]:
    """`rageval eval` with no garbage collection and `_QUIET`'s environment (a value the user
    set is kept), both as they were afterwards (tests run the CLI in their own process).
    Collections run while the measures engine imports (pydantic builds its models) and find
    nothing to free: eval makes no cycles worth collecting in its second or so.

    A speed trick (bench/README.md, "Fast paths in one place"): on the 5M-row tied TREC run,
    five runs alternating with it turned off (quiet machine): wall 1.14-1.30 s against
    1.19-1.34 s, CPU median 1.88 s against 1.99 s; on the 50,000 x 100 Parquet run, CPU
    1.86-1.91 s against 1.93-2.24 s."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        with environ.defaults_meanwhile(_QUIET):  # (read when numpy and pydantic need them)
            yield
    finally:
        if collecting:
            gc.enable()


def pyarrow_without_pandas() -> None:
    """`rageval eval`'s Arrow path: pyarrow looks for pandas once, on its first conversion of
    numpy or Python values (`pa.array`, `to_numpy`, a scalar argument), only to recognise pandas
    objects, and imports it (0.46 s) if installed. Looked for while `import pandas` fails, it
    finds none and stops looking; a pandas conversion (`to_pandas`, `from_pandas`) still
    imports it. So a TREC run scored by the numpy and Arrow kernels (`pandas_free` measures, no
    `--document-level` or `--llm-qrels`) reads, scores and prints with no pandas at all.

    A process-level trick of `eval` (bench/README.md, "Fast feedback",
    2026-11-28 at load 6-8): on the 5M-row bench files, six runs of each build alternating,
    1.62 s median wall (1.39-2.56) and 0.86 s user CPU against 2.57 s (2.00-3.04) and 1.10 s
    with pandas; two `side_by_side.py` runs at that load (7 each) did not tell them apart."""
    import pyarrow as pa

    if "pandas" in sys.modules:  # (imported already: nothing to save)
        return
    sys.meta_path.insert(0, _NO_PANDAS)
    try:
        pa.array([0])
    finally:
        sys.meta_path.remove(_NO_PANDAS)


def arrow_pool_keeping_pages() -> None:
    """`rageval eval`'s Arrow allocator: jemalloc (else the system allocator) instead of
    pyarrow's default mimalloc, whose system time swings with the kernel's supply of fresh
    (huge) pages: on the 186 MB bench run, whose parse allocates 350 MB of Arrow at its peak,
    mimalloc's runs spent 0.6-1.6 s of system CPU, jemalloc's 0.40-0.55 s.

    A speed trick (bench/README.md, "Fast feedback", fourth pass; 2026-11-28 17:27-17:31 UTC, load
    3.3-4.2): six alternating pairs under `/usr/bin/time`, wall 1.39-1.75 s against 1.72-2.81 s;
    `side_by_side.py --repeat 7`, medians 1.55 s wall, 1.37 s CPU (1.32-1.48) against 1.80 s,
    1.74 s (1.07-2.52). mimalloc's best runs are faster (1.05 s), its median slower."""
    import pyarrow as pa

    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except NotImplementedError:  # (a pyarrow built without jemalloc)
        pa.set_memory_pool(pa.system_memory_pool())


class _NoPandas:
    """A module finder under which `import pandas` fails (ModuleNotFoundError)."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        if name == "pandas":
            raise ModuleNotFoundError("No module named 'pandas'", name=name)


_NO_PANDAS = _NoPandas()

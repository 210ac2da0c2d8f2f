"""Expected errors reach people as one line: the one place that turns them into `dg.Failure`.

An `InputError` (bad input, and its kinds `NetworkError`, `ArchiveError`, `StorageError`)
already says what went wrong, where, and what to do; raised in an asset or the IO manager it
becomes a `dg.Failure` whose description is that line, not chained to the original (whose trace
adds nothing and, for network errors, is what the line was made to keep out of logs). Dagster
shows the description first on the run page and in `dagster job execute`. Retrying would meet
the same input, so the failure bypasses retry policies. Anything else keeps its trace.
"""

import functools
import inspect
from collections.abc import Callable
from typing import TypeVar

import dagster as dg

from rageval_pipeline.core.errors import InputError

# Set on every wrapped function, so that a test can check no asset was left out.
MARK = "one_line_errors"
F = TypeVar("F", bound=Callable)


def _failure(exc: InputError) -> dg.Failure:
    return dg.Failure(description=str(exc), allow_retries=False)


def one_line_errors(fn: F) -> F:
    """`fn` (a plain function or a generator function, as assets are) with its expected errors
    raised as one-line `dg.Failure`s."""
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def steps(*args, **kwargs):
            try:
                return (yield from fn(*args, **kwargs))
            except InputError as exc:
                raise _failure(exc) from None

        wrapped = steps
    else:

        @functools.wraps(fn)
        def call(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except InputError as exc:
                raise _failure(exc) from None

        wrapped = call
    setattr(wrapped, MARK, True)
    return wrapped  # type: ignore[return-value]

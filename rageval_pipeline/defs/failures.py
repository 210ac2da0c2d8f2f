"""Expected errors reach people as one line: the one place that turns them into `dg.Failure`.

An `InputError` (bad input, and its kinds `NetworkError`, `ArchiveError`, `StorageError`;
an object-store failure is turned into a `StorageError` first: core.storage.faults) already
says what went wrong, where, and what to do; raised in an asset or the IO manager it becomes
a `refusal`: a `dg.Failure` whose description is that line, not chained to the original (whose
trace adds nothing and, for network errors, is what the line was made to keep out of logs),
and whose stored error is the line alone, without the stack of Dagster's own frames. The run
page and `dagster job execute` (no run config needed) show the step's failure as the line,
and the run's failure repeats it. Retrying would meet the same input, so the failure bypasses
retry policies. Anything else keeps its trace. Other expected ends of a step (the gate's FAIL
verdict, a missing generation set) raise a `refusal` too.

`console`, the jobs' console logger, prints a step failure caused by a `dg.Failure` as
`... STEP_FAILURE - Execution of step "x" failed: <the line>` and the run failure after it
without the line again: the line once. Dagster uses it only when run config names it
(`scripts/evaluate` passes `deploy/run_config/one_line.yaml`; `dagster job execute` and
`dg launch` take `-c deploy/run_config/one_line.yaml`).

Raised while the definitions load (a `RAGEVAL_*` folder that is a URL, a bad systems.yaml), it
becomes a `LoadRefused` instead: no step runs, so there is no run page to show it on.
"""

import functools
import inspect
import logging
import re
from collections.abc import Callable
from typing import TypeVar

import click
import dagster as dg
from dagster._core.errors import DagsterUserCodeProcessError
from dagster._utils.error import SerializableErrorInfo

from rageval_pipeline.core.errors import InputError

# Set on every wrapped function, so that a test can check no asset was left out.
MARK = "one_line_errors"
F = TypeVar("F", bound=Callable)


class _OneLineFailure(dg.Failure, DagsterUserCodeProcessError):
    """A `dg.Failure` whose stored error is its line alone, with no stack.

    Dagster stores a step failure's error with the frames it passed through: its own (about 20),
    then the `raise`. It offers no public way to leave them out (a failure hook runs after the
    event is stored; `Failure` metadata adds to it; the console logger is the project's only
    when run config names it; DAGSTER_REDACT_USER_CODE_ERRORS hides the message too). What it
    does have is its own path for an error that happened in another process: the error of a
    `DagsterUserCodeProcessError` is stored as that process serialised it
    (`dagster._utils.error.serializable_error_info_from_exc_info`). This failure is one, with
    the line as its error, so the run page and `dagster job execute` show the line and no
    `Stack Trace:`. Both are internal to Dagster 1.13: should a later Dagster drop the path,
    this is an ordinary `dg.Failure` again (the line first, then the frames), and
    tests/test_job_output.py says so.
    """

    def __init__(self, line: str) -> None:
        Exception.__init__(self, line)  # each base's __init__ wants the other's arguments
        self.description, self.metadata, self.allow_retries = line, {}, False
        self.user_code_process_error_infos = [one_line_error(line)]


def refusal(line: str) -> dg.Failure:
    """The step's end for an expected failure: `line` is all that is shown and stored, and a
    retry policy does not retry it (it would meet the same input)."""
    return _OneLineFailure(line)


def expected(exc: Exception) -> InputError | None:
    """`exc` as an expected error: itself when an InputError, or the one line of
    core.storage.faults for an object-store failure (credentials, bucket, endpoint,
    throttling) under the storage folder; None for anything else."""
    if isinstance(exc, InputError):
        return exc
    from rageval_pipeline.core.io import paths
    from rageval_pipeline.core.storage.faults import object_store_error

    try:
        return object_store_error(exc, paths.storage_dir())
    except InputError:
        return None


def one_line_errors(fn: F) -> F:
    """`fn` (a plain function or a generator function, as assets are) with its expected errors
    raised as one-line `dg.Failure`s."""
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def steps(*args, **kwargs):
            try:
                return (yield from fn(*args, **kwargs))
            except Exception as exc:
                if (error := expected(exc)) is None:
                    raise
                raise refusal(str(error)) from None

        wrapped = steps
    else:

        @functools.wraps(fn)
        def call(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                if (error := expected(exc)) is None:
                    raise
                raise refusal(str(error)) from None

        wrapped = call
    setattr(wrapped, MARK, True)
    return wrapped  # type: ignore[return-value]


# Dagster's engine event for a step process that died (multiprocess executor), logged before
# the step's failure: how it ended.
_CRASH = re.compile(
    r"child process for step (\S+) "
    r"(was terminated by signal \d+ \(\w+\)|unexpectedly exited with code -?\d+)"
)


def crash_line(step_context, error: SerializableErrorInfo) -> str | None:
    """For a step whose process died (the multiprocess executor's ChildProcessCrashException,
    whose trace names neither the signal nor a cause), the one line saying how the process
    ended and what to do; None for any other error."""
    if error.cls_name != "ChildProcessCrashException":
        return None
    key = step_context.step.key
    records = step_context.instance.get_records_for_run(
        step_context.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT, ascending=False, limit=20
    ).records
    said = [m for r in records if (m := _CRASH.search(r.event_log_entry.message or ""))]
    how = next((m[2] for m in said if m[1] == key), "ended without a word")
    return (
        f"the process of step {key} {how}: killed from outside (kill, the out-of-memory "
        "killer: see `dmesg` or the pod's events) or crashed; give it more memory "
        "(fewer steps at once: multiprocess max_concurrent) or run again"
    )


def one_line_error(line: str) -> SerializableErrorInfo:
    """A step's stored error that is `line` alone, as a `refusal` stores it."""
    failure = f"{dg.Failure.__module__}.{dg.Failure.__qualname__}"
    return SerializableErrorInfo(f"{failure}: {line}\n", [], dg.Failure.__name__)


class LoadRefused(click.ClickException):
    """An expected error met while the definitions load. Dagster's CLI is built on click, which
    prints a `ClickException` as one `Error: <line>` line, without a trace, and exits with its
    code (2, as the `rageval` CLI for bad input); a code server shows the line as the code
    location's load error."""

    exit_code = 2


def load_refusal(exc: BaseException) -> LoadRefused | None:
    """The `LoadRefused` for an expected error anywhere in `exc`'s chain (Dagster wraps what a
    definitions function raises), None when the chain holds none."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, InputError):
            return LoadRefused(str(seen))
        seen = seen.__cause__ or seen.__context__
    return None


def _failure_line(event: object) -> str | None:
    """The description of the `dg.Failure` a step or run failure event carries, else None."""
    error = getattr(getattr(event, "event_specific_data", None), "error", None)
    if error is None or error.cls_name != dg.Failure.__name__:
        return None
    return error.message.split(": ", 1)[-1].strip()  # "dagster...Failure: <description>"


class _OneLineFailures(logging.Filter):
    """Cuts a record whose event failed by a `dg.Failure` to the event's line, ending in the
    failure's description on a step failure (the run failure repeats nothing)."""

    def filter(self, record: logging.LogRecord) -> bool:
        event = getattr(record, "dagster_event", None)  # Dagster's LOG_RECORD_EVENT_ATTR
        error = getattr(getattr(event, "event_specific_data", None), "error", None)
        if getattr(error, "cls_name", None) == "ChildProcessCrashException":
            # Dagster's engine event for a dead step process: its text names the signal; the
            # trace under it adds nothing (the step's failure says what to do).
            record.msg = str(record.msg).split("\n\n", 1)[0]
            return True
        line = _failure_line(event)
        if line is not None:
            head = str(record.msg).split("\n\n", 1)[0]
            record.msg = (
                head if getattr(event, "is_run_failure", False) else f"{head.rstrip('.')}: {line}"
            )
        return True


def _console(init_context: dg.InitLoggerContext) -> logging.Logger:
    logger = dg.colored_console_logger.logger_fn(init_context)
    logger.addFilter(_OneLineFailures())
    return logger


# The jobs' `console` logger (Definitions' default loggers): Dagster's colored console logger,
# same config, with one-line failures. Dagster makes a job's loggers only when the run config
# names them (else it prints through its own): deploy/run_config/one_line.yaml (which
# scripts/evaluate passes) and debug.yaml do. A job's default config did not help: a
# partitioned run launched with `-c` dropped it.
console = dg.LoggerDefinition(
    _console,
    config_schema=dg.colored_console_logger.config_schema,
    description="Dagster's colored console logger; a dg.Failure is printed as its one line",
)

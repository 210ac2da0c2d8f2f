"""A run worker's heartbeat in the Dagster instance's storage, so that a dead run worker is
noticed from any host (docs/deploy.md, "Interrupted runs").

The pid check of run_workers is exact but only on the worker's own machine: a run started by
`dagster job execute` on machine A and killed there, while later runs happen on machine B,
was failed only at `max_runtime_seconds` (4 h). So every run worker beats: as its executor
begins the run (in the run worker's own process, whatever the executor) a daemon thread writes
`<time> <host> <space>:<pid>` every `RAGEVAL_HEARTBEAT_S` (30 s) under the key
`rageval/heartbeat/<run id>`
of the instance's key-value store (the run storage's `kvs` table: SQLite locally, PostgreSQL
in a deployment, so every host sees it). It needs nothing from the steps, so it beats through
long steps and pool waits alike. `run_workers.reap` fails a STARTED run whose last beat is
older than `RAGEVAL_HEARTBEAT_STALE_S` (180 s), and one that never beat once it started longer
ago than that (killed before its executor began: every run of the code location beats from
its executor's first moment, the definitions' default executor included).

A host name does not identify a machine: pods with host networking, containers with
`--network host` or cloned VMs share one. So a worker's identity carries its `space`, a digest
of the kernel's boot id and the PID namespace it runs in: a pid is only looked up where the
space is this process's own (the same kernel and PID namespace), else the heartbeat decides.

Not run tags: `add_run_tags` writes back the whole run it read, so a beat could undo a status
that Dagster wrote in between. The hosts' clocks must agree to well within the staleness (NTP).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import dagster as dg
from dagster._core.errors import DagsterSubprocessError
from dagster._utils.error import SerializableErrorInfo

from rageval_pipeline.core.settings.locations import Deployment
from rageval_pipeline.core.storage.locks import space
from rageval_pipeline.defs.failures import crash_line, one_line_error, refusal

KEY = "rageval/heartbeat/"


def host() -> str:
    return socket.gethostname()


@dataclass(frozen=True)
class Beat:
    """A run worker's last heartbeat: when (the worker's clock, epoch seconds), on which host
    and which worker there (`<space>:<pid>`, "" from an older beat)."""

    at: float
    host: str
    worker: str = ""

    def age(self) -> float:
        return time.time() - self.at


def last_beats(instance: dg.DagsterInstance, run_ids: Iterable[str]) -> dict[str, Beat]:
    """The last heartbeat of each run that has beaten, by run id (one query)."""
    keys = {KEY + run_id for run_id in run_ids}
    if not keys:
        return {}
    beats = {}
    for key, value in instance.run_storage.get_cursor_values(keys).items():
        at, where, worker = [*value.split(" "), "", ""][:3]
        beats[key.removeprefix(KEY)] = Beat(float(at), where, worker)
    return beats


def _beat(instance: dg.DagsterInstance, run_id: str) -> None:
    value = f"{time.time():.3f} {host()} {space()}:{os.getpid()}"
    instance.run_storage.set_cursor_values({KEY + run_id: value})


# Called after each beat with the run's instance, id and log (defs/waiting.py).
OnBeat = Callable[[dg.DagsterInstance, str, dg.DagsterLogManager], None]


class _Heart:
    """The thread beating for one run until `stop`; a failed beat (storage away for a
    moment) is logged and the next one tried, as a missed beat only ages the last one."""

    def __init__(
        self,
        instance: dg.DagsterInstance,
        run_id: str,
        log: dg.DagsterLogManager,
        on_beat: OnBeat | None = None,
    ):
        self._instance, self._run_id, self._log, self._on_beat = instance, run_id, log, on_beat
        self._stop, self._every = threading.Event(), Deployment.from_env().heartbeat_s
        _beat(instance, run_id)  # at once: the run has beaten from its start
        self._thread = threading.Thread(target=self._run, daemon=True, name="run-heartbeat")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            try:
                _beat(self._instance, self._run_id)
                if self._on_beat is not None:
                    self._on_beat(self._instance, self._run_id, self._log)
            except Exception as exc:  # keep beating: the next beat may get through
                self._log.warning(f"heartbeat not written: {type(exc).__name__}: {exc}")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class _Beating(dg.Executor):
    """An executor that beats for its run while it runs it (the run worker's process)."""

    def __init__(self, inner: dg.Executor, on_beat: Callable[[], OnBeat] | None) -> None:
        self._inner, self._on_beat = inner, on_beat
        # A step process that died fails its step, then its run, with one line (failures.py).
        self._crashes: list[str] = []
        self._log_failure = inner.log_failure_or_retry_event_after_error
        inner.log_failure_or_retry_event_after_error = self._crashed  # type: ignore[method-assign]

    def _crashed(self, step_context, error: SerializableErrorInfo, known) -> dg.DagsterEvent:
        if (line := crash_line(step_context, error)) is not None:
            self._crashes.append(line)
            error = one_line_error(line)
        return self._log_failure(step_context, error, known)

    def execute(self, plan_context, execution_plan) -> Iterator[dg.DagsterEvent]:
        on_beat = self._on_beat() if self._on_beat is not None else None
        heart = _Heart(plan_context.instance, plan_context.run_id, plan_context.log, on_beat)
        try:
            yield from self._inner.execute(plan_context, execution_plan)
        except DagsterSubprocessError:
            if not self._crashes:
                raise
            raise refusal("; ".join(self._crashes)) from None  # not the crash's trace again
        finally:
            heart.stop()

    def __getattr__(self, name: str):
        """The wrapped executor's own API, which its execution loop reads off the run's
        executor (this one): Celery's `app_args()`, broker and queues."""
        return getattr(self._inner, name)

    @property
    def retries(self):
        return self._inner.retries

    @property
    def step_dependency_config(self):
        return self._inner.step_dependency_config


def beating(
    executor: dg.ExecutorDefinition, on_beat: Callable[[], OnBeat] | None = None
) -> dg.ExecutorDefinition:
    """`executor`, with its runs' workers beating (and calling what `on_beat` makes for the
    run after each beat); same name, config and requirements."""
    create = executor.executor_creation_fn
    assert create is not None
    return dg.ExecutorDefinition(
        name=executor.name,
        config_schema=executor.config_schema,
        requirements=executor.get_requirements,
        executor_creation_fn=lambda init: _Beating(create(init), on_beat),
        description=executor.description,
    )

"""A run worker's heartbeat in the Dagster instance's storage, so that a dead run worker is
noticed from any host (docs/deploy.md, "Interrupted runs").

The pid check of run_workers is exact but only on the worker's own machine: a run started by
`dagster job execute` on machine A and killed there, while later runs happen on machine B,
was failed only at `max_runtime_seconds` (4 h). So every run worker beats: as its executor
begins the run (in the run worker's own process, whatever the executor) a daemon thread writes
`<time> <host>` every `RAGEVAL_HEARTBEAT_S` (30 s) under the key `rageval/heartbeat/<run id>`
of the instance's key-value store (the run storage's `kvs` table: SQLite locally, PostgreSQL
in a deployment, so every host sees it). It needs nothing from the steps, so it beats through
long steps and pool waits alike. `run_workers.reap` fails a STARTED run whose last beat is
older than `RAGEVAL_HEARTBEAT_STALE_S` (180 s). A run that never beat (started before this
code, run in process by a test, or killed before its executor began) is never judged by it.

Not run tags: `add_run_tags` writes back the whole run it read, so a beat could undo a status
that Dagster wrote in between. The hosts' clocks must agree to well within the staleness (NTP).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import dagster as dg

from rageval_pipeline.core.settings.locations import Deployment

KEY = "rageval/heartbeat/"


def host() -> str:
    return socket.gethostname()


@dataclass(frozen=True)
class Beat:
    """A run worker's last heartbeat: when (the worker's clock, epoch seconds) and where."""

    at: float
    host: str

    def age(self) -> float:
        return time.time() - self.at


def last_beats(instance: dg.DagsterInstance, run_ids: Iterable[str]) -> dict[str, Beat]:
    """The last heartbeat of each run that has beaten, by run id (one query)."""
    keys = {KEY + run_id for run_id in run_ids}
    if not keys:
        return {}
    beats = {}
    for key, value in instance.run_storage.get_cursor_values(keys).items():
        at, _, where = value.partition(" ")
        beats[key.removeprefix(KEY)] = Beat(float(at), where)
    return beats


def _beat(instance: dg.DagsterInstance, run_id: str) -> None:
    instance.run_storage.set_cursor_values({KEY + run_id: f"{time.time():.3f} {host()}"})


class _Heart:
    """The thread beating for one run until `stop`; a failed beat (storage away for a
    moment) is logged and the next one tried, as a missed beat only ages the last one."""

    def __init__(self, instance: dg.DagsterInstance, run_id: str, log: dg.DagsterLogManager):
        self._instance, self._run_id, self._log = instance, run_id, log
        self._stop, self._every = threading.Event(), Deployment.from_env().heartbeat_s
        _beat(instance, run_id)  # at once: the run has beaten from its start
        self._thread = threading.Thread(target=self._run, daemon=True, name="run-heartbeat")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            try:
                _beat(self._instance, self._run_id)
            except Exception as exc:  # keep beating: the next beat may get through
                self._log.warning(f"heartbeat not written: {type(exc).__name__}: {exc}")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class _Beating(dg.Executor):
    """An executor that beats for its run while it runs it (the run worker's process)."""

    def __init__(self, inner: dg.Executor) -> None:
        self._inner = inner

    def execute(self, plan_context, execution_plan) -> Iterator[dg.DagsterEvent]:
        heart = _Heart(plan_context.instance, plan_context.run_id, plan_context.log)
        try:
            yield from self._inner.execute(plan_context, execution_plan)
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


def beating(executor: dg.ExecutorDefinition) -> dg.ExecutorDefinition:
    """`executor`, with its runs' workers beating; same name, config and requirements."""
    create = executor.executor_creation_fn
    assert create is not None
    return dg.ExecutorDefinition(
        name=executor.name,
        config_schema=executor.config_schema,
        requirements=executor.get_requirements,
        executor_creation_fn=lambda init: _Beating(create(init)),
        description=executor.description,
    )

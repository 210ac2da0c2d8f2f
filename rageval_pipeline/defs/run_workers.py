"""A killed run worker frees what its run held, without a person (docs/deploy.md, "Interrupted
runs").

Dagster's default run launcher (`dagster job execute`, `dg launch`, the daemon's local
launches) cannot tell that a run's process is gone: its run stays STARTED and keeps its
`duckdb_write` slot until run monitoring cancels it at `max_runtime_seconds` (4 h), and only
with the daemon running. Its step processes (multiprocess executor) carry on and write rows
and STEP_SUCCESS events for a run nobody watches. Here:

- Every step records its run worker once, as the run tag `rageval/run_worker` =
  `host:pid:start` (start: the process's start time, so a reused pid is not taken for it):
  the step's own process under the in-process executor, else its parent.
- A step in a child process of the run worker (multiprocess) watches its parent: when the
  parent is gone (the child is re-parented) it kills itself at once. Its warehouse writes are
  all or nothing, so nothing is left half-written.
- `reap` fails every STARTED run whose recorded worker ran on this host and is dead, and frees
  its pool slots. Every step of every run calls it as it sets up (before its first pool claim
  in a run: the ingest steps run first, in no pool), so the next run on the machine frees a
  dead run's slot within seconds; with the daemon, the sensor `free_dead_runs` does it every
  30 s (queued runs cannot start while a dead run holds the queue's place);
  `python -m rageval_pipeline.defs.slots` does it by hand (and shows and frees slots).

A worker on another host (a K8s run pod) is never judged from here: its launcher, which can
see it, reports it to the daemon's run monitoring.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path

import dagster as dg

WORKER_TAG = "rageval/run_worker"
WATCH_EVERY_S = 1.0  # how often a step process looks whether its run worker is still there
_watching: set[int] = set()  # run worker pids this process already watches


def started(pid: int) -> str | None:
    """The start time of process `pid` (clock ticks since boot; Linux's /proc), None when it
    is gone. Another system: "?" while the pid exists, so a live pid is never taken as dead."""
    stat = Path(f"/proc/{pid}/stat")
    if Path("/proc/self/stat").exists():
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return None if fields[0] in ("Z", "X") else fields[19]  # a zombie is dead too
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return "?"


def _worker_pid(context: dg.InitResourceContext) -> int:
    """The run worker of this step: this process when steps run in it, else its parent."""
    if context.run is None:
        return os.getpid()
    records = context.instance.get_records_for_run(
        context.run_id, of_type=dg.DagsterEventType.RUN_START, limit=1
    ).records
    event = records[0].event_log_entry.dagster_event if records else None
    return event.pid if event is not None and event.pid is not None else os.getpid()


def claim(context: dg.InitResourceContext) -> None:
    """Record this step's run worker on its run, watch it from a child process, and reap the
    dead runs of this host. Never fails the step: a failure here is logged, and the daemon's
    run monitoring remains (its `max_runtime_seconds`)."""
    try:
        _claim(context)
    except Exception as exc:  # a step must not fail for its watchdog
        context.log.warning(f"not watching this run's worker: {type(exc).__name__}: {exc}")


def _claim(context: dg.InitResourceContext) -> None:
    run, instance = context.run, context.instance
    if run is None or instance is None:
        return
    worker = _worker_pid(context)
    if worker not in (os.getpid(), os.getppid()):
        return  # a step on another host or in a pod: nothing here can watch its worker
    if WORKER_TAG not in run.tags:
        instance.add_run_tags(run.run_id, {WORKER_TAG: f"{_host()}:{worker}:{started(worker)}"})
    if worker == os.getppid() and worker not in _watching:
        _watching.add(worker)
        threading.Thread(target=_watch, args=(worker,), daemon=True, name="run-worker").start()
    reap(instance)


def _watch(worker: int) -> None:
    """Kill this step process once its run worker is gone (it has been re-parented)."""
    while os.getppid() == worker:
        time.sleep(WATCH_EVERY_S)
    os.kill(os.getpid(), signal.SIGKILL)


def _host() -> str:
    return socket.gethostname()


def reap(instance: dg.DagsterInstance) -> list[str]:
    """Fail each STARTED run whose run worker ran on this host and is dead, and free its
    pool slots; the run ids."""
    reaped = []
    runs = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
    for run in runs:
        host, _, rest = run.tags.get(WORKER_TAG, "").partition(":")
        pid, _, start = rest.partition(":")
        if host != _host() or not pid.isdigit() or started(int(pid)) in (start, "?"):
            continue
        instance.report_run_failed(
            run,
            f"its run worker (pid {pid} on {host}) is gone, killed or crashed: failed by "
            f"rageval, which freed its pool slots (docs/deploy.md, Interrupted runs)",
        )
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        reaped.append(run.run_id)
    return reaped


@dg.sensor(
    name="free_dead_runs",
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Fail the STARTED runs whose run worker on this host is gone and free their "
    "pool slots (defs/run_workers.py): a dead run otherwise holds the run queue and the "
    "duckdb_write slot until max_runtime_seconds.",
)
def free_dead_runs(context: dg.SensorEvaluationContext):
    """With the daemon: queued runs wait for a dead run's place in the run queue, so they
    cannot reap it as they start; the daemon does, every 30 s (on its host)."""
    reaped = reap(context.instance)
    return dg.SkipReason(f"failed {len(reaped)} dead run(s): {', '.join(reaped) or 'none'}")


def holders(instance: dg.DagsterInstance, pool: str) -> list[str]:
    """One line per claimed slot of `pool`: run, step, the run's status and worker."""
    lines = []
    for slot in instance.event_log_storage.get_concurrency_info(pool).claimed_slots:
        run = instance.get_run_by_id(slot.run_id)
        status = run.status.value if run else "deleted"
        worker = run.tags.get(WORKER_TAG, "worker not recorded") if run else "-"
        lines.append(f"{pool}: run {slot.run_id} step {slot.step_key} ({status}, {worker})")
    return lines


def free(instance: dg.DagsterInstance, run_id: str) -> None:
    """Fail run `run_id` (unless it already ended) and free its pool slots, by hand."""
    run = instance.get_run_by_id(run_id)
    if run is not None and not run.is_finished:
        instance.report_run_failed(run, "failed by hand: python -m rageval_pipeline.defs.slots")
    instance.event_log_storage.free_concurrency_slots_for_run(run_id)

"""A killed run worker frees what its run held, without a person (docs/deploy.md, "Interrupted
runs").

Dagster's default run launcher (`dagster job execute`, `dg launch`, the daemon's local
launches) cannot tell that a run's process is gone: its run stays STARTED and keeps its
`duckdb_write` slot until run monitoring cancels it at `max_runtime_seconds` (4 h), and only
with the daemon running. Its step processes (multiprocess executor) carry on and write rows
and STEP_SUCCESS events for a run nobody watches. Here:

- Every step records its run worker once, as the run tag `rageval/run_worker` =
  `host:pid:start:space` (start: the process's start time, so a reused pid is not taken for
  it; space: the kernel boot and PID namespace, heartbeat.space, so a pid is looked up only
  where it means that process): the step's own process under the in-process executor, else
  its parent.
- A step in a child process of the run worker (multiprocess) watches its parent: when the
  parent is gone (the child is re-parented) it kills itself at once. Its warehouse writes are
  all or nothing, so nothing is left half-written.
- `reap` fails every STARTED run whose run worker is dead, and frees its pool slots: a worker
  recorded in this host's PID namespace when its pid is gone (at once), one anywhere else when
  its heartbeat (defs/heartbeat.py) is older than `RAGEVAL_HEARTBEAT_STALE_S` (3 min), and a
  run that never beat once it started longer ago than that (killed between RUN_START and its
  executor's first beat: it holds a place in the run queue, not yet a slot). Every step of every
  run calls it as it sets up (before its first pool claim in a run: the ingest steps run
  first, in no pool), so the next run frees a dead run's slot at once (by pid) or once its
  beat is stale; with the daemon, the sensor `free_dead_runs` does it every 30 s (queued
  runs cannot start while a dead run holds the queue's place);
  `python -m rageval_pipeline.defs.slots` does it by hand (and shows and frees slots).

A worker on another host (a K8s run pod, `dagster job execute` on another machine) is judged
by its heartbeat only; a K8s launcher also reports a dead pod to the daemon's run monitoring.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import dagster as dg

from rageval_pipeline.core.settings.locations import Deployment
from rageval_pipeline.defs import heartbeat

WORKER_TAG = "rageval/run_worker"
WATCH_EVERY_S = 1.0  # how often a step process looks whether its run worker is still there
_watching: set[int] = set()  # run worker pids this process already watches
_claimed: set[str] = set()  # runs this process already claimed (each resource's setup asks)


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
        context.run.run_id, of_type=dg.DagsterEventType.RUN_START, limit=1
    ).records
    event = records[0].event_log_entry.dagster_event if records else None
    return event.pid if event is not None and event.pid is not None else os.getpid()


def claim(context: dg.InitResourceContext) -> None:
    """Record this step's run worker on its run, watch it from a child process, and reap the
    dead runs of this host, once per run in a process. Never fails the step: a failure here is
    logged, and the daemon's run monitoring remains (its `max_runtime_seconds`)."""
    run = context.run
    if run is None or run.run_id in _claimed:
        return
    try:
        _claim(context)
    except Exception as exc:  # a step must not fail for its watchdog
        context.log.warning(f"not watching this run's worker: {type(exc).__name__}: {exc}")
        return  # the next resource's setup tries again
    _claimed.add(run.run_id)


def _claim(context: dg.InitResourceContext) -> None:
    run, instance = context.run, context.instance
    if run is None or instance is None:
        return
    worker = _worker_pid(context)
    if worker not in (os.getpid(), os.getppid()):
        return  # a step on another host or in a pod: nothing here can watch its worker
    if WORKER_TAG not in run.tags:
        recorded = f"{heartbeat.host()}:{worker}:{started(worker)}:{heartbeat.space()}"
        instance.add_run_tags(run.run_id, {WORKER_TAG: recorded})
    if worker == os.getppid() and worker not in _watching:
        _watching.add(worker)
        threading.Thread(target=_watch, args=(worker,), daemon=True, name="run-worker").start()
    reap(instance)


def _watch(worker: int) -> None:
    """Kill this step process once its run worker is gone (it has been re-parented)."""
    while os.getppid() == worker:
        time.sleep(WATCH_EVERY_S)
    os.kill(os.getpid(), signal.SIGKILL)


def reap(instance: dg.DagsterInstance) -> list[str]:
    """Fail each STARTED run whose run worker is dead, and free its pool slots; the run ids.
    A worker in this host's PID namespace is judged by its pid (exact, at once); one
    elsewhere, or never recorded, by its heartbeat (defs/heartbeat.py): dead once its last
    beat is older than `RAGEVAL_HEARTBEAT_STALE_S`, or, never having beaten, once the run
    started longer ago than that."""
    records = instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
    beats = heartbeat.last_beats(instance, (r.dagster_run.run_id for r in records))
    stale_s = Deployment.from_env().heartbeat_stale_s
    reaped = []
    for record in records:
        run = record.dagster_run
        why = _dead(run.tags.get(WORKER_TAG, ""), beats.get(run.run_id), stale_s, record.start_time)
        if why is None:
            continue
        instance.report_run_failed(
            run,
            f"its run worker ({why}) is gone, killed or crashed: failed by rageval, which "
            f"freed its pool slots (docs/deploy.md, Interrupted runs)",
        )
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        reaped.append(run.run_id)
    return reaped


def _dead(
    worker: str, beat: heartbeat.Beat | None, stale_s: float, start: float | None
) -> str | None:
    """Why the run worker recorded as `worker` (`host:pid:start:space`), with last heartbeat
    `beat`, of a run started at `start` (epoch s), is dead; None while it may live."""
    host, pid, started_at, space = [*worker.split(":"), "", "", ""][:4]
    if host == heartbeat.host() and space and space == heartbeat.space() and pid.isdigit():
        return None if started(int(pid)) in (started_at, "?") else f"pid {pid} on {host}"
    if beat is not None:
        if beat.age() > stale_s:
            return f"on {beat.host}, last heartbeat {beat.age():.0f} s ago, over {stale_s:g} s"
        return None
    if start is not None and time.time() - start > stale_s:
        age = time.time() - start  # killed between RUN_START and its executor's first beat
        return f"started {age:.0f} s ago, never a heartbeat in over {stale_s:g} s"
    return None


@dg.sensor(
    name="free_dead_runs",
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Fail the STARTED runs whose run worker is gone (its pid on this host, its "
    "heartbeat elsewhere) and free their pool slots (defs/run_workers.py): a dead run "
    "otherwise holds the run queue and the duckdb_write slot until max_runtime_seconds.",
)
def free_dead_runs(context: dg.SensorEvaluationContext):
    """With the daemon: queued runs wait for a dead run's place in the run queue, so they
    cannot reap it as they start; the daemon does, every 30 s."""
    reaped = reap(context.instance)
    return dg.SkipReason(f"failed {len(reaped)} dead run(s): {', '.join(reaped) or 'none'}")


def holders(instance: dg.DagsterInstance, pool: str) -> list[str]:
    """One line per claimed slot of `pool`: run, step, the run's status, worker and last
    heartbeat."""
    slots = instance.event_log_storage.get_concurrency_info(pool).claimed_slots
    beats = heartbeat.last_beats(instance, {slot.run_id for slot in slots})
    lines = []
    for slot in slots:
        run = instance.get_run_by_id(slot.run_id)
        status = run.status.value if run else "deleted"
        worker = run.tags.get(WORKER_TAG, "worker not recorded") if run else "-"
        beat = beats.get(slot.run_id)
        if beat is not None:
            worker += f", last heartbeat {beat.age():.0f} s ago on {beat.host}"
        lines.append(f"{pool}: run {slot.run_id} step {slot.step_key} ({status}, {worker})")
    return lines


def in_queue(instance: dg.DagsterInstance, pool: str) -> list[str]:
    """One line per STARTED run holding no slot of `pool`: each holds a place in the run
    queue (a run killed before its first heartbeat among them, until it is failed)."""
    slots = instance.event_log_storage.get_concurrency_info(pool).claimed_slots
    holding = {slot.run_id for slot in slots}
    records = instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
    records = [r for r in records if r.dagster_run.run_id not in holding]
    beats = heartbeat.last_beats(instance, {r.dagster_run.run_id for r in records})
    lines = []
    for record in records:
        run = record.dagster_run
        worker = run.tags.get(WORKER_TAG, "worker not recorded")
        beat = beats.get(run.run_id)
        if beat is not None:
            worker += f", last heartbeat {beat.age():.0f} s ago on {beat.host}"
        elif record.start_time is not None:
            worker += f", started {time.time() - record.start_time:.0f} s ago, no heartbeat yet"
        lines.append(f"run queue: run {run.run_id} (STARTED, {worker})")
    return lines


def free(instance: dg.DagsterInstance, run_id: str) -> None:
    """Fail run `run_id` (unless it already ended) and free its pool slots, by hand."""
    run = instance.get_run_by_id(run_id)
    if run is not None and not run.is_finished:
        instance.report_run_failed(run, "failed by hand: python -m rageval_pipeline.defs.slots")
    instance.event_log_storage.free_concurrency_slots_for_run(run_id)

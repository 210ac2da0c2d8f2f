"""A run whose step waits for a pool slot says so at INFO: what it waits for (each holder of
the pool, as `python -m rageval_pipeline.defs.slots` lists them) and since when, at its first
heartbeat after the wait began and then every REPORT_EVERY_S. Dagster's own `Step blocked by
limit for pool` is a DEBUG event that names no holder, so a run behind a dead holder waited
with nothing printed at INFO.

While it waits it also fails the dead runs (run_workers.reap): a step reaps as it sets up, but
a holder whose heartbeat was still fresh then is freed here once it goes stale, without the
daemon.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import dagster as dg

from rageval_pipeline.defs import run_workers

REPORT_EVERY_S = 60.0  # a waiting step repeats its line this often (at heartbeats)


class Waiting:
    """Called after each heartbeat of one run (heartbeat.OnBeat)."""

    def __init__(self) -> None:
        self._reported: dict[tuple[str, str], float] = {}  # (pool, step) -> when last said

    def __call__(
        self, instance: dg.DagsterInstance, run_id: str, log: dg.DagsterLogManager
    ) -> None:
        storage = instance.event_log_storage
        waiting = [
            (pool, step)
            for pool in sorted(storage.get_concurrency_keys())
            for step in storage.get_concurrency_info(pool).pending_steps
            if step.run_id == run_id and step.assigned_timestamp is None
        ]
        if not waiting:
            return
        for dead in run_workers.reap(instance):
            log.info(f"failed run {dead}: its run worker is gone (its pool slots are freed)")
        now = time.monotonic()
        for pool, step in waiting:
            last = self._reported.get((pool, step.step_key))
            if last is not None and now - last < REPORT_EVERY_S:
                continue
            self._reported[pool, step.step_key] = now
            since = step.enqueued_timestamp
            since = since if since.tzinfo else since.replace(tzinfo=UTC)
            waited = (datetime.now(UTC) - since).total_seconds()
            held = run_workers.holders(instance, pool)
            log.info(
                f"step {step.step_key} waiting since {since:%Y-%m-%d %H:%M:%S} UTC "
                f"({waited:.0f} s) for a slot of pool {pool}, held by: "
                + ("; ".join(held) or "no run (the slot is being handed over)")
                + " (python -m rageval_pipeline.defs.slots lists them; --free RUN_ID frees one)"
            )

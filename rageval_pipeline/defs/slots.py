"""`python -m rageval_pipeline.defs.slots [--free RUN_ID]`: who holds the `duckdb_write` pool's
slots (run, step, status, run worker, last heartbeat) and which other runs hold a place in the
run queue (STARTED), after failing the dead runs (this host's
by pid, any host's by heartbeat) and freeing their slots (defs/run_workers.py); `--free RUN_ID`
fails one run and frees its slots by hand (docs/deploy.md, "Interrupted runs").
`dagster instance concurrency get` counts the slots but names no holder."""

import argparse
import sys

import dagster as dg

from rageval_pipeline.defs import run_workers
from rageval_pipeline.defs.resources import WRITE_POOL


def main(argv: list[str] | None = None) -> int:
    """`python -m rageval_pipeline.defs.slots [--free RUN_ID]`: reap the dead runs, free one
    run's slots by hand, and show who holds the `duckdb_write` slots."""
    parser = argparse.ArgumentParser(prog="python -m rageval_pipeline.defs.slots")
    parser.add_argument("--free", metavar="RUN_ID", help="fail this run and free its slots")
    args = parser.parse_args(argv)
    with dg.DagsterInstance.get() as instance:
        for run_id in run_workers.reap(instance):
            print(f"run {run_id}: its worker is gone; marked failed and its slots freed")
        if args.free:
            run_workers.free(instance, args.free)
            print(f"run {args.free}: failed and its slots freed")
        for line in run_workers.holders(instance, WRITE_POOL) or [f"{WRITE_POOL}: no slot held"]:
            print(line)
        for line in run_workers.in_queue(instance, WRITE_POOL):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())

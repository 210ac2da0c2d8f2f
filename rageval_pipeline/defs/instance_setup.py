"""`python -m rageval_pipeline.defs.instance_setup`: prepare the Dagster instance of
$DAGSTER_HOME once at startup, before the daemon, the webserver or any run: create the
`duckdb_write` pool (see `ensure_write_pool`). Idempotent, and safe when several processes
run it at the same moment (Helm init containers, CI jobs)."""

import sys
import time

import dagster as dg

from rageval_pipeline.defs.resources import WRITE_POOL, ensure_write_pool


def _instance(attempts: int = 5) -> dg.DagsterInstance:
    """The instance of $DAGSTER_HOME. On an empty PostgreSQL database, processes starting
    together each create Dagster's schema, and the losers fail on an object the winner made
    (seen in CI: `type "run_tags" already exists`); a later look finds the schema made."""
    from sqlalchemy.exc import DatabaseError

    for attempt in range(attempts):
        try:
            return dg.DagsterInstance.get()
        except DatabaseError:
            if attempt == attempts - 1:
                raise
            time.sleep(1 + attempt)
    raise AssertionError("unreachable")


def main() -> int:
    with _instance() as instance:
        slots = ensure_write_pool(instance)
    if slots is None:
        print(f"this instance's storage has no concurrency pools; {WRITE_POOL} not created")
    else:
        print(f"pool {WRITE_POOL}: {slots} slot{'s' * (slots != 1)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

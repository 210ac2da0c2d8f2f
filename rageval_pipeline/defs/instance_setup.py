"""`python -m rageval_pipeline.defs.instance_setup`: prepare the Dagster instance of
$DAGSTER_HOME once at startup, before the daemon, the webserver or any run: create the
`duckdb_write` pool (see `ensure_write_pool`). Idempotent, and safe when several processes
run it at the same moment (Helm init containers, CI jobs)."""

import sys

import dagster as dg

from rageval_pipeline.defs.resources import WRITE_POOL, ensure_write_pool


def main() -> int:
    with dg.DagsterInstance.get() as instance:
        slots = ensure_write_pool(instance)
    if slots is None:
        print(f"this instance's storage has no concurrency pools; {WRITE_POOL} not created")
    else:
        print(f"pool {WRITE_POOL}: {slots} slot{'s' * (slots != 1)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The nightly evaluation of the bundled suites."""

import os

import dagster as dg

NIGHTLY_ENV = "RAGEVAL_NIGHTLY_DATASETS"
DEFAULT_NIGHTLY = "techdocs,hotel"


def build_nightly(job) -> dg.ScheduleDefinition:
    @dg.schedule(
        job=job,
        cron_schedule="0 2 * * *",
        execution_timezone="UTC",
        # New schedules start stopped; a release gate nobody has to remember to switch on.
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=f"02:00 UTC: evaluate the datasets in ${NIGHTLY_ENV} ({DEFAULT_NIGHTLY}).",
    )
    def nightly(context: dg.ScheduleEvaluationContext):
        names = os.environ.get(NIGHTLY_ENV, DEFAULT_NIGHTLY).split(",")
        day = context.scheduled_execution_time.strftime("%Y-%m-%d")
        for name in filter(None, (n.strip() for n in names)):
            yield dg.RunRequest(run_key=f"{name}-{day}", partition_key=name)

    return nightly

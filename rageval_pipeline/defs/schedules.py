"""The nightly evaluation of the bundled suites and of the configured BEIR datasets."""

import dagster as dg

from rageval_pipeline.core.settings.locations import Deployment

NIGHTLY_ENV = "RAGEVAL_NIGHTLY_DATASETS"
DEFAULT_NIGHTLY = ",".join(Deployment.model_fields["nightly_datasets"].default)
# BEIR datasets evaluated nightly besides the suites, e.g. "nfcorpus,scifact" (none by default:
# they download from BEIR's host or $RAGEVAL_BEIR_MIRROR).
BEIR_ENV = "RAGEVAL_NIGHTLY_BEIR"


def nightly_datasets() -> list[str]:
    """The datasets in $RAGEVAL_NIGHTLY_DATASETS, then those in $RAGEVAL_NIGHTLY_BEIR, once each."""
    deployment = Deployment.from_env()
    return list(dict.fromkeys(deployment.nightly_datasets + deployment.nightly_beir))


def build_nightly(job) -> dg.ScheduleDefinition:
    @dg.schedule(
        job=job,
        cron_schedule="0 2 * * *",
        execution_timezone="UTC",
        # New schedules start stopped; a release gate nobody has to remember to switch on.
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=f"02:00 UTC: evaluate the datasets in ${NIGHTLY_ENV} ({DEFAULT_NIGHTLY})"
        f" and the BEIR datasets in ${BEIR_ENV}.",
    )
    def nightly(context: dg.ScheduleEvaluationContext):
        day = context.scheduled_execution_time.strftime("%Y-%m-%d")
        for name in nightly_datasets():
            yield dg.RunRequest(run_key=f"{name}-{day}", partition_key=name)

    return nightly

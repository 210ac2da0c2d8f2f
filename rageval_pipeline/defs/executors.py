"""Which executor runs the jobs' steps: this machine's processes, Kubernetes pods or Celery.

`$RAGEVAL_EXECUTOR` picks it when the definitions load (the code location of a deployment sets
it, see deploy/helm-values.yaml): `local` (default), `k8s` (dagster-k8s's k8s_job_executor) or
`celery` (dagster-celery's celery_executor); the last two come with the `deploy` extra. Their
run config lives in deploy/run_config/. Each beats for its run (defs/heartbeat.py).
"""

import dagster as dg

from rageval_pipeline.core.settings.locations import Deployment
from rageval_pipeline.defs.heartbeat import beating
from rageval_pipeline.defs.waiting import Waiting

EXECUTOR_ENV = "RAGEVAL_EXECUTOR"

# In-process by default: steps here are CPU-bound on 2 cores, and the multiprocess executor
# spends seconds per step starting interpreters (18 s vs 3.6 s measured for 5 small steps).
# Run config `execution: {config: {multiprocess: {max_concurrent: N}}}` runs steps in parallel.
LOCAL = dg.multi_or_in_process_executor.configured(
    lambda config: config,
    config_schema=dg.Field(
        dg.Selector({"in_process": dg.Permissive(), "multiprocess": dg.Permissive()}),
        default_value={"in_process": {}},
    ),
)


def executor_from_env() -> dg.ExecutorDefinition:
    """The executor $RAGEVAL_EXECUTOR names, its run workers beating (defs/heartbeat.py) and
    saying what they wait for (defs/waiting.py)."""
    return beating(_named(Deployment.from_env().executor), on_beat=Waiting)


def _named(name: str) -> dg.ExecutorDefinition:
    if name == "local":
        return LOCAL
    if name == "k8s":
        from dagster_k8s import k8s_job_executor

        return k8s_job_executor
    from dagster_celery import celery_executor  # "celery": the setting allows nothing else

    return celery_executor

"""An optional sensor (stopped by default) that evaluates a system when its version changes.

A system's fingerprint covers its configuration and, for a `run_file` system, the run file's
content (`core.systems`), so one comparison notices both a new run file from the team's own
search and a new version of a configured system. The cursor maps system -> fingerprint; the
first tick only records the versions it finds, later ticks start `evaluate_<system>` on the
nightly datasets (`schedules.nightly_datasets`) for each system whose fingerprint is new.
"""

import json
from pathlib import Path

import dagster as dg

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.systems import load_systems
from rageval_pipeline.defs.schedules import nightly_datasets


def current_versions(systems_file: Path, names: list[str]) -> tuple[dict[str, str], list[str]]:
    """Fingerprints of the named systems as the systems file describes them now, and one line
    per system that cannot be fingerprinted (its run file missing, the file malformed)."""
    try:
        catalog = load_systems(systems_file)
    except InputError as exc:
        return {}, [str(exc)]
    versions, problems = {}, []
    for name in names:
        if name not in catalog:
            continue  # removed from the file; its job goes with the next code reload
        try:
            versions[name] = catalog[name].fingerprint()
        except InputError as exc:
            problems.append(str(exc))
    return versions, problems


def build_version_sensor(system_jobs: dict[str, object], systems_file: Path) -> dg.SensorDefinition:
    """`system_jobs` maps a system name to its `evaluate_<system>` job."""

    @dg.sensor(
        name="new_system_version",
        jobs=list(system_jobs.values()),
        minimum_interval_seconds=300,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description="Evaluate a system on the nightly datasets when its configuration or its "
        "run file changes (optional; turn on in the UI).",
    )
    def new_system_version(context: dg.SensorEvaluationContext):
        versions, problems = current_versions(systems_file, list(system_jobs))
        for problem in problems:
            context.log.warning(problem)
        if context.cursor is None:
            context.update_cursor(json.dumps(versions, sort_keys=True))
            return dg.SkipReason(f"recorded the versions of {len(versions)} system(s)")
        seen = json.loads(context.cursor)
        changed = [name for name, version in versions.items() if seen.get(name) != version]
        context.update_cursor(json.dumps({**seen, **versions}, sort_keys=True))
        if not changed:
            return dg.SkipReason("; ".join(["no new system version", *problems]))
        return [
            dg.RunRequest(
                run_key=f"{name}-{versions[name]}-{dataset}",
                job_name=system_jobs[name].name,
                partition_key=dataset,
                tags={"rageval/fingerprint": versions[name]},
            )
            for name in changed
            for dataset in nightly_datasets()
        ]

    return new_system_version

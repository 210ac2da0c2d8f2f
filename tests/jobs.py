"""The one way tests run the real `dagster job execute` CLI on `rageval_pipeline`: the command
(for a test that watches a running process) and a finished run's output; and the same job's
assets materialized in-process, for a test whose CLI run is a later one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[1]
DEBUG = REPO / "deploy" / "run_config" / "debug.yaml"  # step events and RUN_SUCCESS are DEBUG


def job_command(
    job: str, partition: str, *configs: Path, op: str | None = None, **tags: str
) -> list[str]:
    """`dagster job execute` of `job` for `partition` with run configs `configs` (`-c`), only
    the op selection `op` (`-o`) if given, and extra run `tags`."""
    return [
        *(str(BIN / "dagster"), "job", "execute", "-m", "rageval_pipeline", "-j", job),
        *(("-o", op) if op else ()),
        *("--tags", json.dumps({"dagster/partition": partition, **tags})),
        *(arg for config in configs for arg in ("-c", str(config))),
    ]


def forked_steps(path: Path, max_concurrent: int) -> Path:
    """A run config (written to `path`) for the multiprocess executor whose steps fork from one
    server that imported the code and sentence-transformers once (Dagster's `forkserver` start
    method): a spawned step pays seconds of imports each; what a step computes is the same.
    Their parent is the fork server, so they do not watch the run worker (defs/run_workers.py):
    spawned steps, the shipped multiprocess.yaml, do in test_killed_run_worker.py and in one
    of test_deploy_postgres.py's two runs."""
    forkserver = {"forkserver": {"preload_modules": ["rageval_pipeline", "sentence_transformers"]}}
    multiprocess = {"max_concurrent": max_concurrent, "start_method": forkserver}
    path.write_text(json.dumps({"execution": {"config": {"multiprocess": multiprocess}}}))
    return path


def dagster_execute(
    job: str, partition: str, env: dict, cwd: Path, *configs: Path, op: str | None = None, **tags
) -> subprocess.CompletedProcess:
    """The finished job_command run in `cwd` with `env`; its stdout and stderr as text."""
    return subprocess.run(
        job_command(job, partition, *configs, op=op, **tags),
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def materialize_job(job: str, partition: str):
    """The assets of `job` materialized in this process for `partition` (the definitions as
    the RAGEVAL_* variables name them), without raising: its dagster.ExecuteInProcessResult."""
    import dagster as dg

    from rageval_pipeline.defs.definitions import build_definitions

    defs = build_definitions()
    return dg.materialize(
        list(defs.assets),
        selection=list(defs.resolve_job_def(job).asset_layer.selected_asset_keys),
        partition_key=partition,
        resources=defs.resources,
        raise_on_error=False,
    )

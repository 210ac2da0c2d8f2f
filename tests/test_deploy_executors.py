"""The deployment executors: deploy/run_config/{k8s,celery,multiprocess,force}.yaml validate
against the real evaluate_dataset job built with dagster-k8s's and dagster-celery's executors."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
import yaml

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.defs.definitions import build_definitions
from rageval_pipeline.defs.executors import EXECUTOR_ENV
from rageval_pipeline.defs.resources import Settings

REPO = Path(__file__).resolve().parents[1]
RUN_CONFIG = REPO / "deploy" / "run_config"


def evaluate_dataset(monkeypatch: pytest.MonkeyPatch, executor: str) -> dg.JobDefinition:
    monkeypatch.setenv(EXECUTOR_ENV, executor)
    defs = build_definitions(Settings(data_dir=str(REPO / "data")))
    return defs.resolve_job_def("evaluate_dataset")


def run_config(name: str) -> dict:
    return yaml.safe_load((RUN_CONFIG / name).read_text())


def test_k8s_run_config_validates_and_names_real_steps(monkeypatch):
    pytest.importorskip("dagster_k8s", reason="the `deploy` extra (dagster-k8s) is not installed")
    job = evaluate_dataset(monkeypatch, "k8s")
    assert job.executor_def.name == "k8s"
    config = run_config("k8s.yaml")
    result = dg.validate_run_config(job, config)
    per_step = result["execution"]["k8s"]["per_step_k8s_config"]
    shard = per_step["dense__embed_shard"]["container_config"]["resources"]
    assert shard["requests"]["cpu"] == "4" and shard["limits"]["nvidia.com/gpu"] == "1"
    # dagster-k8s looks a step up by its op's name (for a step inside a graph-backed asset,
    # the op's own name): a key that names no op would silently apply to nothing.
    assert set(per_step) <= {op.name for op in job.graph.iterate_op_defs()}


def test_k8s_run_config_rejects_an_unknown_key(monkeypatch):
    pytest.importorskip("dagster_k8s", reason="the `deploy` extra (dagster-k8s) is not installed")
    job = evaluate_dataset(monkeypatch, "k8s")
    config = run_config("k8s.yaml")
    config["execution"]["config"]["per_step_k8s_config"]["dense__embed_shard"]["gpu"] = 1
    with pytest.raises(dg.DagsterInvalidConfigError, match="gpu"):
        dg.validate_run_config(job, config)


def test_celery_run_config_validates(monkeypatch):
    pytest.importorskip("dagster_celery", reason="the `deploy` extra (dagster-celery) is missing")
    monkeypatch.setenv("DAGSTER_CELERY_BROKER_URL", "pyamqp://guest@127.0.0.1:5672//")
    monkeypatch.setenv("DAGSTER_CELERY_BACKEND_URL", "rpc://")
    job = evaluate_dataset(monkeypatch, "celery")
    assert job.executor_def.name == "celery"
    result = dg.validate_run_config(job, run_config("celery.yaml"))
    assert result["execution"]["celery"]["broker"] == "pyamqp://guest@127.0.0.1:5672//"


def test_local_executor_is_in_process_unless_run_config_asks_for_processes(monkeypatch):
    job = evaluate_dataset(monkeypatch, "local")
    name = job.executor_def.name
    assert set(dg.validate_run_config(job, {})["execution"][name]) == {"in_process"}
    multiprocess = dg.validate_run_config(job, run_config("multiprocess.yaml"))
    assert multiprocess["execution"][name]["multiprocess"]["max_concurrent"] == 3


def test_force_run_config_validates_and_sets_force(monkeypatch):
    config = dg.validate_run_config(
        evaluate_dataset(monkeypatch, "local"), run_config("force.yaml")
    )
    assert config["resources"]["settings"]["config"]["force"] is True


def test_unknown_executor_name_is_refused(monkeypatch):
    """One line naming the variable, like every bad setting (docs/configuration.md)."""
    with pytest.raises(InputError) as err:
        evaluate_dataset(monkeypatch, "ray")
    assert str(err.value) == (
        f"environment: {EXECUTOR_ENV}: Input should be 'local', 'k8s' or 'celery'"
    )


def test_helm_values_share_the_storage_folder_with_the_step_pods():
    """The code server, runs and step pods must mount the same PVC where RAGEVAL_STORAGE is."""
    values = yaml.safe_load((REPO / "deploy" / "helm-values.yaml").read_text())
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    env = {e["name"]: e["value"] for e in deployment["env"]}
    assert env["RAGEVAL_EXECUTOR"] == "k8s"
    steps = run_config("k8s.yaml")["execution"]["config"]
    assert f"RAGEVAL_STORAGE={env['RAGEVAL_STORAGE']}" in steps["env_vars"]
    for mounts, volumes in (
        (deployment["volumeMounts"], deployment["volumes"]),
        (steps["volume_mounts"], steps["volumes"]),
    ):
        # Other volumes may sit beside it (the code server's instance config for its init step).
        (mount,) = [m for m in mounts if m["mountPath"] == env["RAGEVAL_STORAGE"]]
        (volume,) = [v for v in volumes if v["name"] == mount["name"]]
        assert volume["persistentVolumeClaim"]["claimName"] == "rageval-storage"
    assert values["concurrency"]["pools"]["defaultLimit"] == 1

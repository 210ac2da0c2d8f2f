"""A folder given as a URL (`RAGEVAL_STORAGE=s3://bucket/eval`) is refused with one line on every
surface, and never taken for the local path `s3:/bucket/eval` (issue 27): the settings, the
`rageval` CLI, `dagster job execute`, scripts/evaluate's folder lookup and run config."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io import paths
from rageval_pipeline.defs.resources import Settings, WarehouseResource
from tests.conftest import REPO, make_pipeline_home
from tests.test_cli_job import dagster_execute

BIN = Path(sys.executable).parent
STORAGE_URL = "s3://bucket/eval"
REFUSED = "is a URL; object storage is not supported yet (issue 27), give a local folder"


def _environment(tmp_path: Path, **variables: str) -> dict[str, str]:
    """A pipeline home under tmp_path with `variables` over its RAGEVAL_* folders."""
    env = {**os.environ, **make_pipeline_home(tmp_path), "PYTHONPATH": str(REPO)}
    return env | {"DAGSTER_HOME": str(tmp_path / "dagster_home")} | variables


def _no_url_folder(cwd: Path) -> None:
    """Nothing named after a scheme (`s3:`, `gs:`...) was created where the command ran."""
    assert not [p.name for p in cwd.iterdir() if p.name.endswith(":")]


@pytest.mark.parametrize(
    ("variable", "value", "shown"),
    [
        ("RAGEVAL_STORAGE", STORAGE_URL, STORAGE_URL),
        ("RAGEVAL_DATA", "gs://bucket/data", "gs://bucket/data"),
        ("RAGEVAL_BASELINES", "file:///srv/baselines", "file:///srv/baselines"),
        # Credentials in the URL are not repeated in the message.
        ("RAGEVAL_STORAGE", "http://key:secret@host:9000/eval?token=t", "http://host:9000/eval"),
    ],
)
def test_a_url_in_a_folder_variable_is_one_line_naming_it(monkeypatch, variable, value, shown):
    monkeypatch.setenv(variable, value)
    with pytest.raises(InputError) as err:
        paths.storage_dir()
    assert str(err.value) == f"environment: {variable}: {shown!r} {REFUSED}"
    assert "secret" not in str(err.value) and "token" not in str(err.value)


def test_local_folders_and_colons_in_them_are_still_folders(monkeypatch, tmp_path):
    for name in ("a:b", "s3:bucket", "s3:/bucket"):  # no `://`: a local (if odd) name
        monkeypatch.setenv("RAGEVAL_STORAGE", str(tmp_path / name))
        assert paths.storage_dir() == tmp_path / name


@pytest.mark.parametrize(
    ("argv", "variables", "line"),
    [
        (["history", "--dataset", "techdocs"], {"RAGEVAL_STORAGE": STORAGE_URL}, None),
        (["history", "--dataset", "techdocs", "--storage", STORAGE_URL], {}, "--storage"),
        (["baseline", "show", "--dataset", "techdocs"], {"RAGEVAL_BASELINES": STORAGE_URL}, None),
        (["pool", "suite.yaml"], {"RAGEVAL_DATA": STORAGE_URL}, None),
    ],
)
def test_the_cli_refuses_a_url_folder_in_one_line(tmp_path, argv, variables, line):
    env = _environment(tmp_path / "home", **variables)
    done = subprocess.run(
        [str(BIN / "rageval"), *argv], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    where = line or f"environment: {next(iter(variables))}"
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"error: {where}: {STORAGE_URL!r} {REFUSED}"]
    _no_url_folder(tmp_path)


def test_the_folder_lookup_of_scripts_evaluate_refuses_a_url(tmp_path):
    env = _environment(tmp_path / "home", RAGEVAL_STORAGE=STORAGE_URL)
    command = [sys.executable, "-m", "rageval_pipeline.core.settings", "--folder", "storage"]
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [
        f"error: environment: RAGEVAL_STORAGE: '{STORAGE_URL}' {REFUSED}"
    ]
    local = subprocess.run(
        command, env=env | {"RAGEVAL_STORAGE": str(tmp_path / "s")}, capture_output=True, text=True
    )
    assert local.stdout == f"{tmp_path / 's'}\n"


def test_run_config_folders_refuse_a_url():
    resources = (
        (lambda: Settings(storage_dir=STORAGE_URL).storage, "settings.storage_dir"),
        (lambda: Settings(data_dir=STORAGE_URL).data, "settings.data_dir"),
        (lambda: WarehouseResource(storage_dir=STORAGE_URL).warehouse, "warehouse.storage_dir"),
    )
    for use, field in resources:
        with pytest.raises(InputError) as err:
            use()
        assert str(err.value) == f"run config: {field}: {STORAGE_URL!r} {REFUSED}"


@pytest.mark.slow
def test_dagster_job_execute_refuses_a_storage_url_in_one_line(tmp_path):
    env = _environment(tmp_path / "home", RAGEVAL_STORAGE=STORAGE_URL)
    (tmp_path / "home" / "dagster_home").mkdir()
    done = dagster_execute("evaluate_bm25", "techdocs", env, tmp_path)
    assert done.returncode == 2
    output = done.stdout + done.stderr
    assert "Traceback" not in output
    # Dagster's own deprecation warning of `job execute` aside, the one line is all it says.
    said = [line for line in output.splitlines() if "SupersessionWarning" not in line]
    assert said[-1] == f"Error: environment: RAGEVAL_STORAGE: '{STORAGE_URL}' {REFUSED}"
    assert [line for line in said if line.startswith("Error")] == [said[-1]]
    _no_url_folder(tmp_path)

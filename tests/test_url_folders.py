"""A URL is never taken for a local path (`s3://bucket/eval` is not the folder `s3:/bucket/eval`,
issue 27). The storage folder may be an object-store URL whose fsspec package is installed;
any other URL there, and any URL as the data or baselines folder, is refused with one line on
every surface: the settings, the `rageval` CLI, `dagster job execute`, scripts/evaluate's
folder lookup and run config."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from upath import UPath

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io import paths
from rageval_pipeline.defs.resources import Settings, WarehouseResource, storage_folder
from tests.conftest import REPO, make_pipeline_home
from tests.test_cli_job import dagster_execute

BIN = Path(sys.executable).parent
STORAGE_URL = "s3://bucket/eval"
UNSUPPORTED = "ftp://host/eval"
REFUSED = "is a URL; give a local folder (only the storage folder may be a URL)"
NOT_STORAGE = "ftp:// is not supported for storage; give a local folder or an s3:// URL"


def _environment(tmp_path: Path, **variables: str) -> dict[str, str]:
    """A pipeline home under tmp_path with `variables` over its RAGEVAL_* folders."""
    env = {**os.environ, **make_pipeline_home(tmp_path), "PYTHONPATH": str(REPO)}
    return env | {"DAGSTER_HOME": str(tmp_path / "dagster_home")} | variables


def _no_url_folder(cwd: Path) -> None:
    """Nothing named after a scheme (`s3:`, `gs:`...) was created where the command ran."""
    assert not [p.name for p in cwd.iterdir() if p.name.endswith(":")]


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        ("RAGEVAL_DATA", "gs://bucket/data", f"'gs://bucket/data' {REFUSED}"),
        ("RAGEVAL_BASELINES", "file:///srv/baselines", f"'file:///srv/baselines' {REFUSED}"),
        ("RAGEVAL_STORAGE", UNSUPPORTED, f"'{UNSUPPORTED}': {NOT_STORAGE}"),
        # Credentials in the URL are not repeated in the message.
        (
            "RAGEVAL_STORAGE",
            "http://key:secret@host:9000/eval?token=t",
            "'http://host:9000/eval': http:// is not supported for storage; give a local folder "
            "or an s3:// URL",
        ),
        (
            "RAGEVAL_STORAGE",
            "s3://key:secret@bucket/eval",
            "'s3://bucket/eval': credentials do not go in the URL; set them in the environment "
            "s3fs reads (docs/deploy.md, Object storage)",
        ),
        ("RAGEVAL_STORAGE", "s3:///eval", "'s3:///eval' names no bucket"),
        # Google Cloud Storage is refused by name, gcsfs installed or not: its failures would
        # end in gcsfs's traces, not in one line.
        (
            "RAGEVAL_STORAGE",
            "gs://bucket/eval",
            "'gs://bucket/eval': gs:// (Google Cloud Storage) is not supported for storage: its "
            "failures are not turned into one line nor tested here; give a local folder or an "
            "s3:// URL (any S3-compatible store, through AWS_ENDPOINT_URL)",
        ),
    ],
)
def test_a_url_a_folder_cannot_be_is_one_line_naming_it(monkeypatch, variable, value, problem):
    monkeypatch.setenv(variable, value)
    with pytest.raises(InputError) as err:
        paths.storage_dir()
    assert str(err.value) == f"environment: {variable}: {problem}"
    assert "secret" not in str(err.value) and "token" not in str(err.value)


def test_an_object_store_url_is_the_storage_folder_and_a_file_url_a_local_one(monkeypatch):
    monkeypatch.setenv("RAGEVAL_STORAGE", STORAGE_URL + "/")
    storage = paths.storage_dir()
    assert isinstance(storage, UPath) and str(storage) == STORAGE_URL
    assert str(storage / "assets" / "corpus") == f"{STORAGE_URL}/assets/corpus"
    monkeypatch.setenv("RAGEVAL_STORAGE", "file:///srv/eval")
    assert paths.storage_dir() == Path("/srv/eval")
    # Schemes are case-insensitive (RFC 3986): `S3://` is s3, not `invalid path value`.
    monkeypatch.setenv("RAGEVAL_STORAGE", "S3://bucket/eval")
    assert str(paths.storage_dir()) == STORAGE_URL
    monkeypatch.setenv("RAGEVAL_STORAGE", "FILE:///srv/eval")
    assert paths.storage_dir() == Path("/srv/eval")


def test_local_folders_and_colons_in_them_are_still_folders(monkeypatch, tmp_path):
    for name in ("a:b", "s3:bucket", "s3:/bucket"):  # no `://`: a local (if odd) name
        monkeypatch.setenv("RAGEVAL_STORAGE", str(tmp_path / name))
        assert paths.storage_dir() == tmp_path / name


@pytest.mark.parametrize(
    ("argv", "variables", "line"),
    [
        (["history", "--dataset", "techdocs"], {"RAGEVAL_STORAGE": UNSUPPORTED}, None),
        (["history", "--dataset", "techdocs", "--storage", UNSUPPORTED], {}, "--storage"),
        (["baseline", "show", "--dataset", "techdocs"], {"RAGEVAL_BASELINES": STORAGE_URL}, None),
        (["pool", "export", "suite.yaml"], {"RAGEVAL_DATA": STORAGE_URL}, None),
    ],
)
def test_the_cli_refuses_a_url_folder_in_one_line(tmp_path, argv, variables, line):
    env = _environment(tmp_path / "home", **variables)
    done = subprocess.run(
        [str(BIN / "rageval"), *argv], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    where = line or f"environment: {next(iter(variables))}"
    refused = (
        f"'{UNSUPPORTED}': {NOT_STORAGE}"
        if UNSUPPORTED in [*argv, *variables.values()]
        else f"{STORAGE_URL!r} {REFUSED}"
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"error: {where}: {refused}"]
    _no_url_folder(tmp_path)


def test_the_folder_lookup_of_scripts_evaluate_refuses_an_unsupported_url(tmp_path):
    env = _environment(tmp_path / "home", RAGEVAL_STORAGE=UNSUPPORTED)
    command = [sys.executable, "-m", "rageval_pipeline.core.settings", "--folder"]
    done = subprocess.run(
        [*command, "storage"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [
        f"error: environment: RAGEVAL_STORAGE: '{UNSUPPORTED}': {NOT_STORAGE}"
    ]

    def lookup(folder: str, storage: str) -> str:
        done = subprocess.run(
            [*command, folder],
            env=env | {"RAGEVAL_STORAGE": storage, "RAGEVAL_SCRATCH": str(tmp_path / "scratch")},
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    assert lookup("storage", str(tmp_path / "s")) == lookup("local", str(tmp_path / "s"))
    assert lookup("storage", str(tmp_path / "s")) == f"{tmp_path / 's'}\n"
    # An object-store URL is printed as such; its log and warehouse go to a local folder.
    assert lookup("storage", STORAGE_URL) == f"{STORAGE_URL}\n"
    assert lookup("local", STORAGE_URL) == f"{tmp_path / 'scratch' / 's3' / 'bucket' / 'eval'}\n"
    _no_url_folder(tmp_path)


def test_run_config_folders_refuse_a_url_they_cannot_be():
    resources = (
        (lambda: Settings(storage_dir=UNSUPPORTED).storage, "settings.storage_dir"),
        (lambda: WarehouseResource(storage_dir=UNSUPPORTED).warehouse, "warehouse.storage_dir"),
        (lambda: storage_folder(UNSUPPORTED, "io_manager.base_dir"), "io_manager.base_dir"),
    )
    for use, field in resources:
        with pytest.raises(InputError) as err:
            use()
        assert str(err.value) == f"run config: {field}: '{UNSUPPORTED}': {NOT_STORAGE}"
    with pytest.raises(InputError) as err:
        assert Settings(data_dir=STORAGE_URL).data
    assert str(err.value) == f"run config: settings.data_dir: {STORAGE_URL!r} {REFUSED}"
    assert str(Settings(storage_dir=STORAGE_URL).storage) == STORAGE_URL


@pytest.mark.slow
def test_dagster_job_execute_refuses_an_unsupported_storage_url_in_one_line(tmp_path):
    env = _environment(tmp_path / "home", RAGEVAL_STORAGE=UNSUPPORTED)
    (tmp_path / "home" / "dagster_home").mkdir()
    done = dagster_execute("evaluate_bm25", "techdocs", env, tmp_path)
    assert done.returncode == 2
    output = done.stdout + done.stderr
    assert "Traceback" not in output
    # Dagster's own deprecation warning of `job execute` aside, the one line is all it says.
    said = [line for line in output.splitlines() if "SupersessionWarning" not in line]
    assert said[-1] == f"Error: environment: RAGEVAL_STORAGE: '{UNSUPPORTED}': {NOT_STORAGE}"
    assert [line for line in said if line.startswith("Error")] == [said[-1]]
    _no_url_folder(tmp_path)

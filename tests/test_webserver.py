"""The Dagster UI: a real dagster-webserver process, asked over GraphQL and looked at with
headless Chromium (Debian's `chromium`; that part skips with a reason when it is absent)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.dagster_ui import graphql, graphql_when_loaded, running_webserver

pytestmark = pytest.mark.slow


@pytest.fixture
def webserver(pipeline_home: Path) -> Iterator[str]:
    home = pipeline_home / "dagster_home"
    home.mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    with running_webserver(env, pipeline_home, pipeline_home / "webserver.log") as url:
        yield url


def test_ui_serves_the_asset_graph_jobs_and_partitions(webserver):
    data = graphql_when_loaded(
        webserver,
        "{ assetNodes { assetKey { path } partitionKeys } }",
    )
    nodes = {"/".join(n["assetKey"]["path"]): n for n in data["assetNodes"]}
    assert {"beir_archive", "corpus", "queries", "qrels", "bm25/run", "bm25/metrics", "gate"} <= (
        set(nodes)
    )
    assert {"nfcorpus", "beir-mini"} <= set(nodes["corpus"]["partitionKeys"])
    assert nodes["gate"]["partitionKeys"] == []
    jobs = graphql(
        webserver,
        "{ repositoriesOrError { ... on RepositoryConnection { nodes { jobs { name } } } } }",
    )
    names = {j["name"] for r in jobs["repositoriesOrError"]["nodes"] for j in r["jobs"]}
    assert {"evaluate_dataset", "ingest_dataset", "evaluate_bm25"} <= names


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_asset_graph_renders_in_headless_chromium(webserver, tmp_path):
    graphql_when_loaded(webserver, "{ assetNodes { id } }")
    profile = tmp_path / "profile"
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=20000",
    ]
    page = f"{webserver}/assets/gate"
    dom = subprocess.run(
        ["chromium", *flags, "--dump-dom", page],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "gate" in dom and "evaluate_bm25" in dom and "checks" in dom.lower(), dom[-2000:]
    shot = tmp_path / "gate.png"
    subprocess.run(
        ["chromium", *flags, "--window-size=1400,900", f"--screenshot={shot}", page],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    shutil.copy(shot, os.environ.get("RAGEVAL_SCREENSHOT", tmp_path / "kept.png"))

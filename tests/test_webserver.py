"""The Dagster UI: a real dagster-webserver process, asked over GraphQL and looked at with
headless Chromium (Debian's `chromium`; that part skips with a reason when it is absent)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def webserver(pipeline_home: Path) -> Iterator[str]:
    port = _free_port()
    home = pipeline_home / "dagster_home"
    home.mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    log = (pipeline_home / "webserver.log").open("w")
    proc = subprocess.Popen(
        [
            str(BIN / "dagster-webserver"),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-m",
            "rageval_pipeline",
        ],
        env=env,
        cwd=pipeline_home,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert proc.poll() is None, (pipeline_home / "webserver.log").read_text()[-3000:]
            try:
                if httpx.get(f"{url}/server_info", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.5)
        else:
            pytest.fail("dagster-webserver did not answer /server_info within 120 s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _graphql(url: str, query: str) -> dict:
    response = httpx.post(f"{url}/graphql", json={"query": query}, timeout=60)
    response.raise_for_status()
    body = response.json()
    assert "errors" not in body, body
    return body["data"]


def _graphql_when_loaded(url: str, query: str) -> dict:
    """The code location loads in the background after the server answers: poll briefly."""
    deadline = time.monotonic() + 60
    while True:
        data = _graphql(url, query)
        if data["assetNodes"] or time.monotonic() > deadline:
            return data
        time.sleep(1)


def test_ui_serves_the_asset_graph_jobs_and_partitions(webserver):
    data = _graphql_when_loaded(
        webserver,
        "{ assetNodes { assetKey { path } partitionKeys } }",
    )
    nodes = {"/".join(n["assetKey"]["path"]): n for n in data["assetNodes"]}
    assert {"beir_archive", "corpus", "queries", "qrels", "bm25/run", "bm25/metrics", "gate"} <= (
        set(nodes)
    )
    assert {"nfcorpus", "beir-mini"} <= set(nodes["corpus"]["partitionKeys"])
    assert nodes["gate"]["partitionKeys"] == []
    jobs = _graphql(
        webserver,
        "{ repositoriesOrError { ... on RepositoryConnection { nodes { jobs { name } } } } }",
    )
    names = {j["name"] for r in jobs["repositoriesOrError"]["nodes"] for j in r["jobs"]}
    assert {"evaluate_dataset", "ingest_dataset", "evaluate_bm25"} <= names


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_asset_graph_renders_in_headless_chromium(webserver, tmp_path):
    _graphql_when_loaded(webserver, "{ assetNodes { id } }")
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

"""A real dagster-webserver process for tests, and its GraphQL endpoint."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

BIN = Path(sys.executable).parent
MODULE = ("-m", "rageval_pipeline")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_webserver(env: dict, cwd: Path, log_path: Path) -> Iterator[str]:
    """Serve `rageval_pipeline` on a free loopback port until the block ends; yield its URL."""
    port = free_port()
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [str(BIN / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(port), *MODULE],
            env=env,
            cwd=cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                assert proc.poll() is None, log_path.read_text()[-3000:]
                try:
                    if httpx.get(f"{url}/server_info", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.5)
            else:
                pytest.fail("dagster-webserver did not answer /server_info within 120 s")
            yield url
        finally:
            stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """Terminate a process this test started; kill it if it does not exit within 20 s."""
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()


def graphql(url: str, query: str, variables: dict | None = None) -> dict:
    response = httpx.post(
        f"{url}/graphql", json={"query": query, "variables": variables or {}}, timeout=60
    )
    response.raise_for_status()
    body = response.json()
    assert "errors" not in body, body
    return body["data"]


def graphql_when_loaded(url: str, query: str) -> dict:
    """The code location loads in the background after the server answers: poll briefly."""
    deadline = time.monotonic() + 60
    while True:
        data = graphql(url, query)
        if data["assetNodes"] or time.monotonic() > deadline:
            return data
        time.sleep(1)

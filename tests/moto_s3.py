"""A local S3-compatible server (moto's server mode, as s3fs's own tests use) on a free
loopback port, and the environment that points s3fs/botocore at it: never the internet."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

STARTUP_DEADLINE_S = 60.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def moto_server(env: dict[str, str] | None = None) -> Iterator[dict[str, str]]:
    """Run `python -m moto.server` until the block ends; yield the AWS_* variables (dummy
    keys) that make s3fs talk to it. `env`: the server's own variables (moto's settings, e.g.
    INITIAL_NO_AUTH_ACTION_COUNT to check credentials and permissions)."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not start on port {port}") from None
                time.sleep(0.2)
        yield {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_ACCESS_KEY_ID": "moto-test-key",
            "AWS_SECRET_ACCESS_KEY": "moto-test-secret-do-not-show",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    finally:
        server.terminate()
        server.wait(timeout=30)

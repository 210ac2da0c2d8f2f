"""A secret never reaches Dagster's records: a real `dagster job execute` whose HTTP system
takes its token from the environment fails with one clear line, and no file under
DAGSTER_HOME or the storage folder (SQLite event logs, compute logs, Parquet, DuckDB) holds
any part of the token."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.loopback_http import reply
from tests.test_cli_job import dagster_execute

pytestmark = pytest.mark.slow

# Distinctive pieces: whichever way a store escapes or encodes the value, one of them shows.
PIECES = [b"s3cr3t", b"TOKEN-value", b"TOKEN-value".decode().encode("utf-16-le")]
TOKEN = "Bearer s3cr3t-TOKEN-value"


def files_holding(roots: list[Path], needle: bytes) -> list[Path]:
    """Every file under `roots` whose raw bytes contain `needle` (binary-safe)."""
    found = []
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
                found.append(path)
    return found


def run_http_system(home: Path, url: str, token: str) -> tuple[str, list[Path]]:
    """Configure an http system reading SEARCH_API_TOKEN, run its job on beir-mini, return
    the combined output and the folders Dagster and the pipeline wrote."""
    system = {
        "retriever": "http",
        "url": url,
        "timeout_s": 10,
        "retries": 1,
        "headers_from_env": {"Authorization": "SEARCH_API_TOKEN"},
    }
    (home / "data" / "systems.yaml").write_text(json.dumps({"systems": {"ours": system}}))
    dagster_home = home / "dagster_home"
    dagster_home.mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home), "SEARCH_API_TOKEN": token}
    result = dagster_execute("evaluate_ours", "beir-mini", env, home)
    assert result.returncode != 0, "the job should fail"
    return result.stdout + result.stderr, [dagster_home, home / "storage"]


def assert_no_piece_of_the_token(output: str, roots: list[Path]) -> None:
    for piece in PIECES:
        assert piece not in output.encode(), f"{piece!r} in the command's output"
        assert files_holding(roots, piece) == [], f"{piece!r} stored"


MALFORMED = [
    (TOKEN + "\n", "it contains a line break"),
    (TOKEN + "\r\nX-Injected: 1", "it contains a line break"),
    ("Bearer s3cr3t-TOKEN-value-\u00e9t\u00e9", "it contains a non-ASCII character"),
]


@pytest.mark.parametrize(("token", "problem"), MALFORMED, ids=["newline", "crlf", "non-ascii"])
def test_a_malformed_token_fails_the_job_and_is_stored_nowhere(
    pipeline_home, scripted, token, problem
):
    url = scripted.route("/search", reply(200, b'{"results": []}'))
    output, roots = run_http_system(pipeline_home, url, token)
    # The header and the variable are named, never the value.
    expected = (
        f"{url}: headers_from_env.Authorization: environment variable SEARCH_API_TOKEN is not "
        f"a valid Authorization header value: {problem} (the value is not shown)"
    )
    assert expected in output, output[-3000:]
    assert scripted.requests == [], "nothing may be sent with a malformed header"
    # The grep can find what is there: the failure's message is in the event log.
    assert files_holding(roots, b"(the value is not shown)"), "the event log was not searched"
    assert_no_piece_of_the_token(output, roots)


def test_a_rejected_token_echoed_by_the_server_is_stored_nowhere(pipeline_home, scripted):
    echo = lambda h: reply(401, str(h.headers).encode(), {"WWW-Authenticate": TOKEN})(h)  # noqa: E731
    url = scripted.route("/search", echo)
    output, roots = run_http_system(pipeline_home, url, TOKEN)
    assert f"{url}: query " in output and "HTTP 401 Unauthorized (not retried)" in output
    assert scripted.requests[0].headers["Authorization"] == TOKEN, "the token was sent"
    assert files_holding(roots, b"HTTP 401 Unauthorized"), "the event log was not searched"
    assert_no_piece_of_the_token(output, roots)

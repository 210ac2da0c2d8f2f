"""Shared fixtures: a loopback HTTP server, small BEIR archives, an isolated pipeline home, and
beir-mini evaluated once per session (per xdist worker) and copied into each test's home."""

from __future__ import annotations

import http.server
import io
import json
import os
import shutil
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytest_plugins = ["tests.loopback_http"]  # the `scripted` server of the network tests

# torch (and BLAS) on one thread in the tests and every process they start (set before any
# import of torch): two pytest workers on 2 cores, each with two-thread kernels that spin
# against the other processes, made MiniLM and the tiny model 10-20x slower on a busy box.
os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED_BEIR = REPO.parent / "shared" / "data" / "beir"


@dataclass
class LoopbackServer:
    """Serves a folder on 127.0.0.1; counts requests per path; can fail the first N GETs."""

    root: Path
    url: str = ""
    requests: list[str] = field(default_factory=list)
    fail_first: int = 0
    fail_status: int = 503


@pytest.fixture
def loopback(tmp_path: Path) -> Iterator[LoopbackServer]:
    root = tmp_path / "mirror"
    root.mkdir()
    state = LoopbackServer(root=root)

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def do_GET(self):
            state.requests.append(self.path)
            if state.fail_first > 0:
                state.fail_first -= 1
                self.send_error(state.fail_status)
                return
            super().do_GET()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def make_beir_zip(name: str, source: Path) -> bytes:
    """A BEIR-style archive (`{name}/corpus.jsonl`, ...) of a BEIR-layout folder."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path in sorted(source.rglob("*")):
            if path.is_file() and path.suffix in {".jsonl", ".tsv"}:
                zf.write(path, f"{name}/{path.relative_to(source)}")
    return buffer.getvalue()


@pytest.fixture
def beir_mini() -> Path:
    return REPO / "data" / "suites" / "beir-mini"


def make_pipeline_home(root: Path) -> dict[str, str]:
    """A private data folder (suites, systems.yaml with bm25 only, gate.yaml, baselines) and
    storage folder under `root`; returns the RAGEVAL_* environment variables naming them."""
    data = root / "data"
    (data / "suites").mkdir(parents=True)
    for suite in ("beir-mini", "techdocs"):
        shutil.copytree(REPO / "data" / "suites" / suite, data / "suites" / suite)
    (data / "systems.yaml").write_text(
        json.dumps(
            {"systems": {"bm25": {"retriever": "bm25", "chunking": {"strategy": "reference"}}}},
            indent=2,
        )
    )
    (data / "gate.yaml").write_text((REPO / "data" / "gate.yaml").read_text())
    (data / "baselines").mkdir()
    return make_pipeline_home_env(root)


def make_pipeline_home_env(root: Path) -> dict[str, str]:
    """The RAGEVAL_* environment variables naming the data and storage folders under `root`."""
    data = root / "data"
    return {
        "RAGEVAL_DATA": str(data),
        "RAGEVAL_STORAGE": str(root / "storage"),
        "RAGEVAL_BASELINES": str(data / "baselines"),
        "HF_HUB_OFFLINE": "1",
    }


@pytest.fixture
def pipeline_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """make_pipeline_home in tmp_path, wired through the RAGEVAL_* environment variables."""
    for name, value in make_pipeline_home(tmp_path).items():
        monkeypatch.setenv(name, value)
    return tmp_path


@dataclass(frozen=True)
class Evaluated:
    """A pipeline home whose beir-mini partition was materialized whole (every asset, check
    and report), and that materialization's result (its events; read-only)."""

    home: Path
    result: object  # dagster.ExecuteInProcessResult


@pytest.fixture(scope="session")
def evaluated_template(tmp_path_factory: pytest.TempPathFactory) -> Evaluated:
    """beir-mini evaluated once per session in a template home (15-22 s, mostly the gate's
    plots): tests get a copy through `evaluated_home`, never this folder itself."""
    import dagster as dg

    from rageval_pipeline.defs.definitions import build_definitions

    root = tmp_path_factory.mktemp("evaluated-template")
    with pytest.MonkeyPatch.context() as env:
        for name, value in make_pipeline_home(root).items():
            env.setenv(name, value)
        defs = build_definitions()
        result = dg.materialize(
            list(defs.assets),
            partition_key="beir-mini",
            resources=defs.resources,
            raise_on_error=False,
        )
    assert result.success
    return Evaluated(root, result)


@pytest.fixture
def evaluated_home(
    evaluated_template: Evaluated, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """pipeline_home with beir-mini already evaluated: a copy of the session's template (its
    data and storage folders) in tmp_path, wired through the RAGEVAL_* variables. A copy reuses
    every step's result as the original would (test_pipeline's reuse tests run on copies)."""
    for folder in ("data", "storage"):
        shutil.copytree(evaluated_template.home / folder, tmp_path / folder, symlinks=True)
    for name, value in make_pipeline_home_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    return tmp_path


# The files that took longest in CI (scripts/test prints the slowest tests), heaviest first:
# under `--dist loadfile` a long file started last is the whole run's tail, and the last three
# hold no `slow` test, so the marker alone left them among the short files.
HEAVIEST = (
    "test_journey.py",  # the saturated machine, three more jobs
    "test_shards_executors.py",  # multiprocess and Celery executors (MiniLM, PostgreSQL)
    "test_deploy_postgres.py",  # two suites on a PostgreSQL instance
    "test_deploy_interrupted.py",  # mostly waiting for the daemon: beside CPU-bound files
    "test_object_storage_job.py",  # S3 (moto)
    "test_labels_job.py",
    "test_shards.py",  # beir-mini with MiniLM at 1, 2 and 4 shards
    "test_derived_qrels.py",  # techdocs with MiniLM at two chunkings
    "test_pipeline.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The HEAVIEST files first, then the other files holding end-to-end (`slow`) tests, then
    the rest, each file's own order kept: under scripts/test's `--dist loadfile` the long files
    start early and short ones fill the tail."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}

    def rank(item: pytest.Item) -> tuple[int, int]:
        if item.path.name in HEAVIEST:
            return 0, HEAVIEST.index(item.path.name)
        return (1 if item.path in slow_files else 2), 0

    items.sort(key=rank)

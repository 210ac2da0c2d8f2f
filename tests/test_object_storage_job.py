"""`RAGEVAL_STORAGE=s3://bucket/eval` through the real `dagster job execute`, against a local
moto S3 server: the job writes the same asset tables, run tables, indexes, embedding cache and
reports to the bucket as the same job writes to a local folder (the warehouse as a lake), and
nothing to a local folder named `s3:` (issue 27). One run per side: `evaluate_hybrid` of the
shipped systems on beir-mini builds both index kinds (bm25s' folder, the dense vectors),
embeds through the cache and reports."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from rageval_pipeline.core.report import REPORT_FILES
from rageval_pipeline.core.retrieval.bm25 import BM25Index
from tests.conftest import REPO, make_pipeline_home
from tests.jobs import dagster_execute, job_command
from tests.moto_s3 import moto_server

pytestmark = pytest.mark.slow
JOB, DATASET = "evaluate_hybrid", "beir-mini"
SECRET = "moto-test-secret-do-not-show"  # tests/moto_s3.py's dummy secret key
# Columns that differ between any two runs: when and by which run, and timed latencies.
VOLATILE = re.compile(r"_at$|run_id|latency|seconds|_ms$|timestamp|started")
# Parts of file names that differ between any two runs: run ids, times, content keys (they
# hash tables holding timed latencies), embedding shards' write time.
RUN_ID = re.compile(
    r"\d{8}T\d{6}\w*Z|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f-]{22,27}|\d{8}_\d{6}|[0-9a-f]{64}"
    r"|shard-\d{20}-[0-9a-f]{8}"
)


@pytest.fixture(scope="module")
def both(tmp_path_factory) -> tuple[Path, Path, Path]:
    """The local run's storage folder, a download of the S3 run's storage, and the S3 run's
    working directory."""
    root = tmp_path_factory.mktemp("object_storage")
    env = {**os.environ, **make_pipeline_home(root), "PYTHONPATH": str(REPO)}
    shutil.copy(REPO / "data" / "systems.yaml", root / "data" / "systems.yaml")
    for side in ("local", "s3"):
        (root / side / "dagster_home").mkdir(parents=True)
    local = env | {"DAGSTER_HOME": str(root / "local" / "dagster_home")}
    local["RAGEVAL_STORAGE"] = str(root / "local" / "storage")
    local["RAGEVAL_SCRATCH"] = str(root / "local" / "scratch")  # (its plot cache)
    # The two runs at once (they share nothing but the code): much of each is one process
    # waiting for its steps' imports and writes, and the other's fills the gaps.
    command = job_command(JOB, DATASET)
    with (root / "local.log").open("w") as log:
        beside = subprocess.Popen(command, env=local, cwd=root / "local", stdout=log, stderr=log)
        try:
            with moto_server() as aws:
                import s3fs

                s3 = s3fs.S3FileSystem(
                    endpoint_url=aws["AWS_ENDPOINT_URL"],
                    key=aws["AWS_ACCESS_KEY_ID"],
                    secret=aws["AWS_SECRET_ACCESS_KEY"],
                    skip_instance_cache=True,
                )
                s3.mkdir("bucket")
                remote = env | aws | {"DAGSTER_HOME": str(root / "s3" / "dagster_home")}
                remote |= {
                    "RAGEVAL_STORAGE": "s3://bucket/eval",
                    "RAGEVAL_SCRATCH": str(root / "scratch"),
                }
                done = dagster_execute(JOB, DATASET, remote, root / "s3")
                output = done.stdout + done.stderr
                assert done.returncode == 0, output[-3000:]
                # The gate again on the same bucket, then its figures: from the plot cache now.
                again = dagster_execute(JOB, DATASET, remote, root / "s3", op="gate*")
                (root / "gate-again.log").write_text(again.stdout + again.stderr)
                output += again.stdout + again.stderr
                assert aws["AWS_SECRET_ACCESS_KEY"] == SECRET and SECRET not in output
                s3.get("bucket/eval/", str(root / "s3" / "bucket") + "/", recursive=True)
        except BaseException:
            beside.kill()
            raise
        finally:
            beside.wait(600)
    assert beside.returncode == 0, (root / "local.log").read_text()[-3000:]
    # The local side's gate (and figures) again too, so both warehouses record two gates.
    again = dagster_execute(JOB, DATASET, local, root / "local", op="gate*")
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    return root / "local" / "storage", root / "s3" / "bucket", root / "s3"


def _files(folder: Path) -> set[str]:
    """Relative paths of every file, run ids and timestamps in names replaced by `*`."""
    return {RUN_ID.sub("*", p.relative_to(folder).as_posix()) for p in folder.rglob("*.*")}


def _frame(path: Path) -> pd.DataFrame:
    frame = pq.read_table(path).to_pandas()
    return frame.drop(columns=[c for c in frame.columns if VOLATILE.search(c)])


def test_the_bucket_holds_what_a_local_run_writes_and_nothing_went_to_a_local_s3_folder(both):
    local, bucket, cwd = both
    written = _files(local) - {f for f in _files(local) if f.startswith(("datasets/", "archives/"))}
    # The warehouse is a lake in the bucket (core.storage.lake), not a DuckDB file anywhere.
    lake = {f for f in _files(bucket) if f.startswith("lake/")}
    assert _files(bucket) - lake == written - {"rageval.duckdb", "rageval.lock"}
    assert {f.split("/")[1] for f in lake} >= {"_commits", "runs", "query_metrics"}
    assert not list((cwd.parent / "scratch").rglob("*.duckdb"))
    for where in (cwd, cwd.parent, REPO):
        assert not [p.name for p in where.iterdir() if p.name.endswith(":")]
    # The secret key reached neither the bucket, nor Dagster's event log, nor the scratch.
    secret = SECRET.encode()
    assert not [p for p in cwd.parent.rglob("*") if p.is_file() and secret in p.read_bytes()]


def test_the_asset_and_run_tables_are_the_same_frames(both):
    local, bucket, _ = both
    tables = sorted(p.relative_to(local) for p in local.rglob("*.parquet"))
    # The latency table holds timings only (per query and percentiles): not compared.
    tables = [t for t in tables if t.parts[0] in ("assets", "tables") and "latency" not in t.parts]
    assert {t.parts[0] for t in tables} == {"assets", "tables"}
    for table in tables:
        [there] = (bucket / table.parent).glob(RUN_ID.sub("*", table.name))
        pd.testing.assert_frame_equal(_frame(there), _frame(local / table), obj=str(table))


def test_indexes_and_the_embedding_cache_are_the_same(both):
    local, bucket, _ = both
    folder = local / "indexes/dense" / DATASET
    dense = sorted(p.relative_to(local) for p in folder.iterdir())
    assert dense
    for file in dense:
        assert (bucket / file).read_bytes() == (local / file).read_bytes(), file
    # bm25s numbers its vocabulary in set order (string hashes differ between processes), so
    # two builds of one index differ in bytes, not in what they find.
    bm25 = f"indexes/bm25/{DATASET}"
    assert _files(bucket / bm25) == _files(local / bm25)
    there, here = BM25Index.load(bucket / bm25), BM25Index.load(local / bm25)
    queries = pd.read_json(REPO / "data/suites" / DATASET / "queries.jsonl", lines=True)
    for text in queries["text"]:
        assert there.search(text, 10) == here.search(text, 10), text

    def vectors(root: Path) -> pd.DataFrame:
        shards = sorted((root / "embeddings").rglob("shard-*.parquet"))
        return pd.concat(_frame(s) for s in shards).sort_values("key", ignore_index=True)

    assert len(vectors(local)) > 0
    pd.testing.assert_frame_equal(vectors(bucket), vectors(local))


def test_the_lake_in_the_bucket_holds_the_local_warehouses_tables(both):
    import fsspec

    from rageval_pipeline.core.storage.choose import lake_at, open_warehouse
    from rageval_pipeline.core.storage.lake import schemas
    from tests.test_lake import _comparable

    local, bucket, _ = both
    lake = lake_at(fsspec.filesystem("file"), str(bucket / "lake"), existing=True)
    duckdb_file = open_warehouse(local, kind="duckdb", existing=True)
    for table in [*schemas(), "history"]:
        assert _comparable(lake, table) == _comparable(duckdb_file, table), table


def test_a_second_gate_on_the_bucket_decides_with_its_figures_from_the_cache(both):
    *_, cwd = both
    log = (cwd.parent / "gate-again.log").read_text()
    assert "TypeError" not in log, log[-3000:]
    # Each gate decided (a verdict line, the check recorded), the second from cached figures
    # drawn into the bucket's report folders.
    assert re.search(r"(PASS|FAIL) beir-mini", log), log[-3000:]
    assert "ASSET_CHECK_EVALUATION" in log, log[-3000:]
    assert re.search(r"report_figures - [0-9]+ figure\(s\) drawn into s3://", log), log[-3000:]
    cached = list((cwd.parent / "scratch" / "cache" / "plots").glob("*.svg"))
    assert cached


def test_the_reports_are_in_the_bucket(both):
    _local, bucket, _ = both
    latest = f"reports/{DATASET}/latest"
    for name in REPORT_FILES.values():
        assert (bucket / latest / name).is_file(), name
    there, here = (json.loads((root / latest / "gate.json").read_text()) for root in both[:2])
    assert [c["message"] for c in there["checks"]] == [c["message"] for c in here["checks"]]

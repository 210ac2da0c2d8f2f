"""A damaged lake fails in one line naming the commit and file, reads nothing outside its root,
and `rageval lake check|repair|gc|compact` mend it without touching what is good (issue 36).
Through the real CLI's `main`, on a real lake of Parquet files."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rageval_pipeline.cli import main
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.storage.choose import open_warehouse
from rageval_pipeline.core.storage.commits import REPAIR, live_files
from tests.test_storage import _results, _run_row

RUNS = {"a": 0.25, "b": 0.5, "c": 0.75}
SUM = "SELECT run_id, sum(value) AS v FROM query_metrics GROUP BY run_id ORDER BY run_id"


def _lake(folder: Path):
    return open_warehouse(folder, kind="lake")


@pytest.fixture
def storage(tmp_path) -> Path:
    """A storage folder whose lake holds runs a, b and c, one commit each."""
    folder = tmp_path / "storage"
    lake = _lake(folder)
    for run_id, value in RUNS.items():
        lake.record_run(_run_row(run_id), _results(run_id, value))
    return folder


def _commit(storage: Path, run_id: str) -> Path:
    """The commit file that added run `run_id`."""
    for path in sorted((storage / "lake" / "_commits").glob("*.json")):
        if any(f"run_id={run_id}/" in f for f in json.loads(path.read_text())["files"]["runs"]):
            return path
    raise AssertionError(run_id)


def _damage(storage: Path, how: str) -> tuple[Path, str]:
    """Damage run b's commit `how`; the commit file and what the reader is told."""
    commit = _commit(storage, "b")
    doc = json.loads(commit.read_text())
    [metrics] = doc["files"]["query_metrics"]
    if how == "cut commit":
        commit.write_bytes(commit.read_bytes()[:40])
        return commit, "not whole JSON (cut short or overwritten)"
    if how == "outside path":
        # A Parquet file outside the lake, written as the lake writes: never to be read.
        outside = storage.parent / "outside.parquet"
        shutil.copy(storage / "lake" / metrics, outside)
        doc["files"]["run_metrics"] = ["run_metrics/../../outside.parquet"]
        commit.write_text(json.dumps(doc))
        return commit, (
            "files: 'run_metrics/../../outside.parquet' leaves the "
            "lake's folder (an absolute path, or an empty, . or .. segment)"
        )
    if how == "missing file":
        (storage / "lake" / metrics).unlink()
        return commit, f"names a missing file ({metrics})"
    whole = (storage / "lake" / metrics).read_bytes()
    (storage / "lake" / metrics).write_bytes(whole[: len(whole) // 2])
    return commit, f"names an unreadable Parquet file (ArrowInvalid) ({metrics})"


DAMAGE = ["cut commit", "outside path", "missing file", "truncated parquet"]


@pytest.mark.parametrize("how", DAMAGE)
def test_a_damaged_commit_is_one_line_and_repair_drops_only_it(storage, how, capsys):
    commit, problem = _damage(storage, how)
    line = f"{commit}: {problem}: {REPAIR}"
    with pytest.raises(InputError) as err:
        _lake(storage).query(SUM)
    assert str(err.value) == line
    storage_args = ["--storage", str(storage)]
    capsys.readouterr()
    assert main(["lake", "check", *storage_args]) == 1
    assert capsys.readouterr().out.splitlines() == [line, f"{storage}/lake: 1 unusable commit(s)"]
    files = sorted(p for p in (storage / "lake").rglob("*") if p.is_file())
    assert main(["lake", "repair", "--dry-run", *storage_args]) == 0
    assert f"would drop {commit}: {problem}" in capsys.readouterr().out
    assert sorted(p for p in (storage / "lake").rglob("*") if p.is_file()) == files
    assert main(["lake", "repair", *storage_args]) == 0
    assert not commit.exists()
    assert main(["lake", "check", *storage_args]) == 0
    # Runs a and c read as before; b's commit is gone whole, its rows with it.
    assert _lake(storage).query(SUM).values.tolist() == [["a", 1.5], ["c", 1.5]]


def test_the_cli_reader_says_the_same_line_and_exits_2(storage, capsys, monkeypatch):
    commit, problem = _damage(storage, "missing file")
    monkeypatch.setenv("RAGEVAL_WAREHOUSE", "lake")
    monkeypatch.setattr("sys.argv", ["rageval"])
    assert main(["history", "--dataset", "d", "-m", "RR", "--storage", str(storage)]) == 2
    assert capsys.readouterr().err == f"error: {commit}: {problem}: {REPAIR}\n"


def test_gc_deletes_only_old_unreferenced_files(storage, capsys):
    lake_dir = storage / "lake"
    live = live_files(_lake(storage).commits())
    # A killed writer's leftover: a Parquet file no commit names.
    [one] = live["runs"][:1]
    orphan = lake_dir / one.replace(".parquet", "-orphan.parquet")
    shutil.copy(lake_dir / one, orphan)
    before = _lake(storage).query(SUM)
    args = ["lake", "gc", "--storage", str(storage)]
    assert main(args) == 0  # younger than a day: kept
    assert orphan.exists()
    assert capsys.readouterr().out.endswith("0 unreferenced file(s)\n")
    day_ago = time.time() - 25 * 3600
    os.utime(orphan, (day_ago, day_ago))
    assert main([*args, "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith(f"would delete {orphan}\n") and orphan.exists()
    assert main(args) == 0
    assert not orphan.exists()
    # The files a compaction replaced go once it is older than the floor, never the live ones.
    assert main(["lake", "compact", "--storage", str(storage)]) == 0
    assert "query_metrics: 3 files folded into 1" in capsys.readouterr().out
    assert len(live_files(_lake(storage).commits())["query_metrics"]) == 1
    assert main([*args, "--min-age-hours", "0"]) == 0
    deleted = capsys.readouterr().out.splitlines()[:-1]
    assert len(deleted) == 3 * 3  # runs, run_metrics, query_metrics of a, b and c
    pd.testing.assert_frame_equal(_lake(storage).query(SUM), before)
    on_disk = {p.relative_to(lake_dir).as_posix() for p in lake_dir.rglob("*.parquet")}
    assert on_disk == {f for files in live_files(_lake(storage).commits()).values() for f in files}


# Fuzzing commit files: whatever a commit says, a reader gets rows or one LakeError line,
# and never a row of the file outside the lake.
FUZZ = settings(
    max_examples=int(os.environ.get("RAGEVAL_FUZZ_EXAMPLES") or 200) // 4,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
PATHS = st.sampled_from(
    [
        "run_metrics/../../outside.parquet",
        "/tmp/outside.parquet",
        "run_metrics//x.parquet",
        "run_metrics/./x.parquet",
        "run_metrics\\..\\x.parquet",
        "query_metrics/x.parquet",
        "run_metrics",
        "",
        "run_metrics/dataset=d/run_id=zz/x.parquet",
    ]
)
JSONS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8) | PATHS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


@pytest.fixture(scope="module")
def fuzz_lake(tmp_path_factory) -> Path:
    storage = tmp_path_factory.mktemp("fuzz") / "storage"
    lake = _lake(storage)
    lake.record_run(_run_row("a"), _results("a", 0.25))
    outside = _results("outside", 9.0)["run_metrics"]
    pq.write_table(pa_table(outside), storage.parent / "outside.parquet")
    return storage


def pa_table(frame: pd.DataFrame):
    import pyarrow as pa

    return pa.Table.from_pandas(frame, preserve_index=False)


@FUZZ
@given(
    field=st.sampled_from(["files", "replaces", "deletes", "finished", "commit", "owner", "x"]),
    value=JSONS,
    table=st.sampled_from(["run_metrics", "query_metrics", "runs", "nope"]),
    cut=st.none() | st.integers(0, 400),
)
def test_fuzzed_commits_read_or_fail_in_one_line(fuzz_lake, field, value, table, cut):
    from rageval_pipeline.core.storage.commits import claim_name

    doc = json.loads(_commit(fuzz_lake, "a").read_text())
    lake = _lake(fuzz_lake)  # a newly claimed commit each time: readers cache commit files
    doc["commit"] = claim_name(lake.fs, f"{lake.root}/_commits", "fuzz", set())
    if field in ("files", "replaces"):
        value = {table: value if isinstance(value, list) else [value]}
    data = json.dumps(doc | {field: value}).encode()
    commit = fuzz_lake / "lake" / "_commits" / f"{doc['commit']}.json"
    try:
        commit.write_bytes(data if cut is None else data[:cut])
        try:
            rows = _lake(fuzz_lake).query("SELECT run_id FROM run_metrics")
        except InputError as exc:
            assert "\n" not in str(exc) and str(commit) in str(exc)
        else:
            assert "outside" not in rows["run_id"].tolist()
    finally:
        commit.unlink()

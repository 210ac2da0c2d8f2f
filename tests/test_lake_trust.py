"""The lake trusts no commit's name, order or type: commits are ordered by a sequence number
each writer claims exclusively, a commit that would hide data (dated in the future, never
claimed, hand-made) stops reads and `rageval lake check` in one line until repaired, every
commit file is read bounded (links, FIFOs, deep nesting, huge numbers: one line each, no
hang), and `gc` never deletes what a writer still writing has written. Through the real CLI's
`main`, on a real lake of Parquet files."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest

from rageval_pipeline.cli import main
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.storage.commits import WRITER_LIFE_S, claim_name
from tests.test_lake_upkeep import SUM, _commit, _lake
from tests.test_storage import _results, _run_row


@pytest.fixture
def storage(tmp_path) -> Path:
    """A storage folder whose lake holds one run, `only`."""
    folder = tmp_path / "storage"
    _lake(folder).record_run(_run_row("only"), _results("only", 0.5))
    return folder


def _check(storage: Path, capsys) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(["lake", "check", "--storage", str(storage)])
    return code, capsys.readouterr().out.splitlines()


def _forged(storage: Path, name: str, **changes) -> Path:
    """A well-formed commit named `name` that deletes run `only` (a hand-made 'fix')."""
    doc = json.loads(_commit(storage, "only").read_text())
    doc |= dict(commit=name, files={}, deletes=[["runs", "only", None]], **changes)
    path = storage / "lake" / "_commits" / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path


def test_commits_are_numbered_by_claims_one_writer_each(storage):
    lake = _lake(storage)
    folder = storage / "lake" / "_commits"
    first = sorted(p.name for p in folder.glob("*.json"))
    assert [n[:21] for n in first] == ["s00000000000000000001"]
    assert json.loads((folder / "s00000000000000000001.claim").read_text())["commit"] == (
        first[0].removesuffix(".json")
    )
    # Another writer claimed number 2 meanwhile (its commit not yet written): the next takes 3.
    other = claim_name(lake.fs, str(folder), "elsewhere", {1})
    lake.record_run(_run_row("next"), _results("next", 0.25))
    names = sorted(p.name for p in folder.glob("*.json"))
    assert other.startswith("s00000000000000000002-")
    assert names[-1].startswith("s00000000000000000003-")
    assert lake.query(SUM)["run_id"].tolist() == ["next", "only"]
    # A write with nothing to commit (finish's compaction below its threshold) claims nothing:
    # the only claim without its commit is the other writer's, still writing.
    lake.finish(runs="next")
    claims = {p.name[:21] for p in folder.glob("*.claim")}
    commits = {p.name[:21] for p in folder.glob("*.json")}
    assert claims - commits == {other[:21]}


@pytest.mark.parametrize(
    "name, problem",
    [
        # A writer whose clock runs a year ahead, as commits were named before the sequence.
        (
            f"{time.time_ns() + 365 * 86400 * 10**9:020d}-{uuid.uuid4().hex}",
            "s in the future: it would sort after every commit",
        ),
        (f"s{10**19:020d}-{uuid.uuid4().hex}", "was never claimed (a hand-made or copied commit)"),
        ("manual-fix", "not a commit's name (s<sequence>-<id>.json)"),
    ],
    ids=["future-dated", "unclaimed-sequence", "hand-named"],  # fixed: xdist workers compare ids
)
def test_a_commit_that_would_hide_the_only_run_is_refused_not_obeyed(
    storage, name, problem, capsys
):
    before = _lake(storage).query(SUM)
    forged = _forged(storage, name)
    with pytest.raises(InputError) as err:
        _lake(storage).query(SUM)
    assert str(err.value).startswith(f"{forged}: ") and problem in str(err.value)
    assert "\n" not in str(err.value)
    code, lines = _check(storage, capsys)
    assert code == 1 and lines == [str(err.value), f"{storage}/lake: 1 unusable commit(s)"]
    assert main(["lake", "repair", "--storage", str(storage)]) == 0
    assert not forged.exists()
    assert _lake(storage).query(SUM).equals(before)  # the run was never hidden
    assert _check(storage, capsys)[0] == 0


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _nested(path: Path) -> None:
    path.write_text("[" * 200_000 + "]" * 200_000)


def _long_owner(path: Path) -> None:
    path.write_text(f'{{"commit": "{path.stem}", "owner": {"7" * 5000}, "files": {{}}}}')


@pytest.mark.parametrize(
    "make, problem",
    [
        (_fifo, "not a regular file (a FIFO, device or socket)"),
        (_dev_zero, "a symbolic link, not a commit file"),
        (_nested, "nested deeper than a JSON reader follows (not a commit)"),
        (_long_owner, "holds a number of 5000 digits (a commit's have at most 40)"),
    ],
)
def test_odd_commit_files_are_one_line_each_without_a_hang(storage, make, problem, capsys):
    lake = _lake(storage)
    name = claim_name(lake.fs, f"{lake.root}/_commits", "test", set())
    path = storage / "lake" / "_commits" / f"{name}.json"
    make(path)
    started = time.monotonic()
    code, lines = _check(storage, capsys)
    assert code == 1
    assert lines[0] == (
        f"{path}: {problem}: drop it with `rageval lake repair` (see `rageval lake check`)"
    )
    assert time.monotonic() - started < 60  # a generous bound: a FIFO or /dev/zero never ends
    assert main(["lake", "repair", "--storage", str(storage)]) == 0
    assert _check(storage, capsys)[0] == 0


def test_an_unlistable_commits_folder_and_a_missing_storage_are_errors(
    storage, tmp_path, capsys, monkeypatch
):
    missing = tmp_path / "no-such-storage"
    assert main(["lake", "check", "--storage", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {missing}: no such folder: check --storage (or $RAGEVAL_STORAGE)\n"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["lake", "gc", "--storage", str(empty)]) == 2
    assert capsys.readouterr().err.endswith(
        "/empty/lake: no warehouse yet: run an evaluation first\n"
    )
    lake = _lake(storage)

    def refused(*args, **kwargs):  # the OS's answer for a folder this user may not read
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(lake.fs, "ls", refused)
    with pytest.raises(InputError) as err:
        lake.commits()
    assert str(err.value) == (
        f"{storage}/lake/_commits: cannot be listed (Permission denied): let this user read it"
    )


@pytest.mark.parametrize("age", ["-1", "nan", "inf"])
def test_gc_refuses_an_age_that_would_take_a_writers_files(storage, age, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["lake", "gc", "--storage", str(storage), "--min-age-hours", age])
    assert exit_.value.code == 2
    assert f"{age} is not a number of hours >= 0" in capsys.readouterr().err


def test_gc_keeps_what_a_writer_still_writing_has_written(storage, capsys):
    lake = _lake(storage)
    folder = storage / "lake" / "_commits"
    # A writer has claimed its number and written a Parquet file; its commit is not there yet.
    name = claim_name(lake.fs, str(folder), "writing", set())
    [one] = (storage / "lake" / "runs").rglob("*.parquet")
    pending = one.with_name(f"{name}.parquet")
    pending.write_bytes(one.read_bytes())
    args = ["lake", "gc", "--storage", str(storage), "--min-age-hours", "0"]
    assert main(args) == 0
    assert pending.exists()
    # Its claim is older than any writer lives: a killed writer's file, deleted.
    claim = folder / f"{name[:21]}.claim"
    old = time.time() - WRITER_LIFE_S - 60
    os.utime(claim, (old, old))
    os.utime(pending, (old, old))
    capsys.readouterr()
    assert main(args) == 0
    assert not pending.exists()
    assert capsys.readouterr().out.splitlines()[-1].endswith("1 unreferenced file(s)")


def test_on_s3_a_claimed_number_is_never_claimed_again(monkeypatch):
    """The claim is a conditional PUT (If-None-Match: *): a writer whose listing missed
    another's claim (listed just before it) takes the next number, never the same one."""
    import s3fs

    from tests.moto_s3 import moto_server

    with moto_server() as env:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        s3fs.S3FileSystem.clear_instance_cache()
        fs = s3fs.S3FileSystem()
        fs.mkdir("bucket")
        folder = "bucket/eval/lake/_commits"
        first = claim_name(fs, folder, "a", set())
        second = claim_name(fs, folder, "b", set())  # as if it had listed nothing yet
    assert first.startswith("s00000000000000000001-")
    assert second.startswith("s00000000000000000002-")

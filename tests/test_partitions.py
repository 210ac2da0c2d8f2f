"""The dataset partitions (`defs/partitions.py`): the bundled suites validated when the
definitions load, once per content, by a record of the files the validation read."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.suites import golden
from rageval_pipeline.defs.partitions import bundled_suites

TINY = Path(__file__).parent / "fixtures" / "suites" / "tiny"


def test_bundled_suites_are_validated_once_per_content(tmp_path, monkeypatch):
    suites, records = tmp_path / "suites", tmp_path / "cache"
    shutil.copytree(TINY, suites / "tiny")
    path = suites / "tiny" / "suite.json"
    valid = path.read_text()
    old = path.stat().st_mtime_ns - 2_000_000_000

    def rewrite(text: str) -> None:  # as an edit a second ago, then a new process
        path.write_text(text)
        os.utime(path, ns=(old, old))
        monkeypatch.setattr(golden, "_PARSED", {})

    rewrite(valid)
    assert bundled_suites(suites, records) == ["tiny"]  # validated, and recorded
    assert len(list((records / "validated-suites").iterdir())) == 1
    rewrite(valid.replace('"tiny"', '"tiny2"', 1))  # a changed file is validated again
    with pytest.raises(InputError, match="must equal the suite's folder name 'tiny'"):
        bundled_suites(suites, records)
    assert len(list((records / "validated-suites").iterdir())) == 1  # a failure records nothing
    # Broken behind the stamp's back (same size, time put back), the record is trusted: the
    # ingest step still parses the suite and refuses it.
    rewrite(valid.replace('"tiny"', '"tinz"', 1))
    assert bundled_suites(suites, records) == ["tiny"]
    shutil.rmtree(records)
    with pytest.raises(InputError, match="must equal the suite's folder name 'tiny'"):
        bundled_suites(suites, records)
    rewrite(valid + " ")  # another valid content, then the first again: one record kept
    assert bundled_suites(suites, records) == ["tiny"]
    rewrite(valid)
    assert bundled_suites(suites, records) == ["tiny"]
    assert len(list((records / "validated-suites").iterdir())) == 1


def test_a_validation_record_covers_linked_documents_and_the_limits(tmp_path, monkeypatch):
    elsewhere, suites, records = tmp_path / "kept" / "tiny", tmp_path / "suites", tmp_path / "c"
    shutil.copytree(TINY, elsewhere)
    suites.mkdir()
    (suites / "tiny").symlink_to(elsewhere)  # a suite kept elsewhere, linked in
    old = time.time_ns() - 2_000_000_000
    for file in elsewhere.rglob("*"):
        os.utime(file, ns=(old, old))
    assert bundled_suites(suites, records) == ["tiny"]
    in_flight = records / "validated-suites" / ".0123.tmp"  # another process's record, half-way
    in_flight.write_text("")
    document = elsewhere / "documents" / "auth-guide.md"
    document.rename(document.with_suffix(".bak"))  # through the link: the record does not hold
    monkeypatch.setattr(golden, "_PARSED", {})
    with pytest.raises(InputError, match=r"auth-guide\.md"):
        bundled_suites(suites, records)
    document.with_suffix(".bak").rename(document)
    assert bundled_suites(suites, records) == ["tiny"]
    assert in_flight.exists()  # old records go, never another process's temp file
    monkeypatch.setenv("RAGEVAL_MAX_FILE_BYTES", "100")  # stricter limits: validated again
    with pytest.raises(InputError, match="over the limit of 100"):
        bundled_suites(suites, records)
    monkeypatch.delenv("RAGEVAL_MAX_FILE_BYTES")
    blocked = tmp_path / "a-file"
    blocked.write_text("")  # a cache that cannot be written: validated, nothing recorded
    assert bundled_suites(suites, blocked) == ["tiny"]

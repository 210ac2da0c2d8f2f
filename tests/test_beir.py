"""The BEIR download path against a real loopback HTTP server."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from rageval_pipeline.core import beir
from tests.conftest import make_beir_zip


@pytest.fixture
def archive(loopback, beir_mini) -> tuple[str, bytes]:
    data = make_beir_zip("mini", beir_mini)
    (loopback.root / "mini.zip").write_bytes(data)
    return hashlib.md5(data).hexdigest(), data


def test_download_verifies_caches_and_skips_second_request(loopback, archive, tmp_path):
    md5, data = archive
    cache = tmp_path / "cache"
    first = beir.fetch_archive("mini", cache, base=loopback.url, expected_md5=md5)
    assert first.downloaded and first.path.read_bytes() == data
    assert loopback.requests == ["/mini.zip"]
    second = beir.fetch_archive("mini", cache, base=loopback.url, expected_md5=md5)
    assert not second.downloaded
    assert loopback.requests == ["/mini.zip"], "a verified cache must not be downloaded again"
    assert not list(cache.glob(".*.part")), "no temp file may be left behind"


def test_wrong_md5_names_url_and_both_sums_and_keeps_cached_archive(loopback, archive, tmp_path):
    md5, data = archive
    cache = tmp_path / "cache"
    beir.fetch_archive("mini", cache, base=loopback.url, expected_md5=md5)
    (loopback.root / "mini.zip").write_bytes(data + b"tampered")
    bad = hashlib.md5(data + b"tampered").hexdigest()
    wrong = "0" * 32
    # The cached copy does not match `wrong`, so a download happens and must fail.
    with pytest.raises(beir.ArchiveError) as err:
        beir.fetch_archive("mini", cache, base=loopback.url, expected_md5=wrong)
    message = str(err.value)
    assert f"{loopback.url}/mini.zip" in message
    assert wrong in message and bad in message
    assert (cache / "mini.zip").read_bytes() == data, "the good cached archive was touched"
    assert not list(cache.glob(".*.part"))


def test_transient_errors_are_retried(loopback, archive, tmp_path):
    md5, _ = archive
    loopback.fail_first = 2
    result = beir.fetch_archive(
        "mini", tmp_path, base=loopback.url, expected_md5=md5, backoff_s=0.01
    )
    assert result.downloaded
    assert loopback.requests == ["/mini.zip"] * 3


def test_not_found_is_final_and_names_the_url(loopback, tmp_path):
    with pytest.raises(beir.ArchiveError, match=r"/absent\.zip failed: HTTP 404"):
        beir.fetch_archive("absent", tmp_path, base=loopback.url, expected_md5="1" * 32)
    assert loopback.requests == ["/absent.zip"]


def test_mirror_environment_variable_overrides_official_url(monkeypatch):
    monkeypatch.delenv(beir.MIRROR_ENV, raising=False)
    assert beir.archive_url("nfcorpus") == f"{beir.OFFICIAL_BASE_URL}/nfcorpus.zip"
    monkeypatch.setenv(beir.MIRROR_ENV, "http://127.0.0.1:9/beir/")
    assert beir.archive_url("nfcorpus") == "http://127.0.0.1:9/beir/nfcorpus.zip"


def test_unknown_dataset_without_md5_is_refused(tmp_path):
    with pytest.raises(beir.ArchiveError, match="no md5 is known"):
        beir.fetch_archive("not-a-beir-set", tmp_path)


def test_extract_is_complete_and_replaces_atomically(beir_mini, tmp_path):
    zipped = tmp_path / "mini.zip"
    zipped.write_bytes(make_beir_zip("mini", beir_mini))
    folder = beir.extract_archive(zipped, tmp_path / "datasets", "mini")
    assert (folder / "corpus.jsonl").read_bytes() == (beir_mini / "corpus.jsonl").read_bytes()
    assert (folder / "qrels" / "dev.tsv").exists()
    again = beir.extract_archive(zipped, tmp_path / "datasets", "mini")
    assert again == folder and sorted(p.name for p in (tmp_path / "datasets").iterdir()) == ["mini"]


@pytest.mark.parametrize("member", ["../evil.txt", "/abs/evil.txt", "mini/../../evil.txt"])
def test_extract_refuses_path_traversal(tmp_path, member):
    zipped = tmp_path / "evil.zip"
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr("mini/corpus.jsonl", "{}\n")
        zf.writestr(member, "x")
    with pytest.raises(beir.ArchiveError, match="unsafe member path"):
        beir.extract_archive(zipped, tmp_path / "datasets", "mini")
    assert not (tmp_path / "evil.txt").exists()
    assert not (tmp_path / "datasets" / "mini").exists()


def test_extract_refuses_symlinks(tmp_path):
    zipped = tmp_path / "link.zip"
    with zipfile.ZipFile(zipped, "w") as zf:
        info = zipfile.ZipInfo("mini/corpus.jsonl")
        info.external_attr = 0o120777 << 16
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(beir.ArchiveError, match="symlink"):
        beir.extract_archive(zipped, tmp_path / "datasets", "mini")


@pytest.mark.skipif(
    not (Path(__file__).resolve().parents[2] / "shared/data/beir/nfcorpus.zip").exists(),
    reason="../shared/data/beir/nfcorpus.zip (the official BEIR archive) is not present",
)
def test_official_nfcorpus_archive_verifies_against_beir_table(tmp_path, loopback):
    source = Path(__file__).resolve().parents[2] / "shared/data/beir/nfcorpus.zip"
    (loopback.root / "nfcorpus.zip").symlink_to(source)
    result = beir.fetch_archive("nfcorpus", tmp_path, base=loopback.url)
    assert result.md5 == beir.BEIR_MD5["nfcorpus"] == "a89dba18a62ef92f7d323ec890a0d38d"
    folder = beir.extract_archive(result.path, tmp_path / "datasets", "nfcorpus")
    assert sum(1 for _ in (folder / "corpus.jsonl").open()) == 3633

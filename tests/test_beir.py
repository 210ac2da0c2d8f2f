"""The BEIR download path against a real loopback HTTP server."""

from __future__ import annotations

import hashlib
import os
import struct
import zipfile
from pathlib import Path

import pytest

from rageval_pipeline.core.errors import NetworkError
from rageval_pipeline.core.io import beir
from rageval_pipeline.core.settings.locations import OFFICIAL_BEIR_URL
from tests.conftest import make_beir_zip
from tests.loopback_http import reply, trickle

PREFIX = "RAGEVAL_ARCHIVE"


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


@pytest.mark.parametrize("status", [403, 404, 410])
def test_client_errors_are_final_and_name_the_url(loopback, tmp_path, status):
    loopback.fail_first, loopback.fail_status = 1, status
    with pytest.raises(NetworkError) as err:
        beir.fetch_archive("absent", tmp_path, base=loopback.url, expected_md5="1" * 32)
    assert str(err.value) == f"{loopback.url}/absent.zip: HTTP {status} (not retried)"
    assert loopback.requests == ["/absent.zip"]
    assert not list(tmp_path.glob(".*.part"))


def test_mirror_environment_variable_overrides_official_url(monkeypatch):
    monkeypatch.delenv("RAGEVAL_BEIR_MIRROR", raising=False)
    assert beir.archive_url("nfcorpus") == f"{OFFICIAL_BEIR_URL}/nfcorpus.zip"
    monkeypatch.setenv("RAGEVAL_BEIR_MIRROR", "http://127.0.0.1:9/beir/")
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
    with pytest.raises(beir.ArchiveError) as err:
        beir.extract_archive(zipped, tmp_path / "datasets", "mini")
    assert str(err.value) == f"{zipped}: unsafe member path {member!r}"
    assert not (tmp_path / "evil.txt").exists()
    assert not (tmp_path / "datasets" / "mini").exists()


@pytest.mark.parametrize(
    ("mode", "problem"),
    [
        (0o120777, "is a symlink"),
        (0o120644, "is a symlink"),
        (0o010644, "is not a file or folder"),  # a FIFO
        (0o020644, "is not a file or folder"),  # a character device
        (0o060644, "is not a file or folder"),  # a block device
    ],
)
def test_extract_refuses_symlinks_and_special_files(tmp_path, mode, problem):
    zipped = tmp_path / "link.zip"
    with zipfile.ZipFile(zipped, "w") as zf:
        info = zipfile.ZipInfo("mini/corpus.jsonl")
        info.external_attr = mode << 16
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(beir.ArchiveError) as err:
        beir.extract_archive(zipped, tmp_path / "datasets", "mini")
    assert str(err.value) == f"{zipped}: member 'mini/corpus.jsonl' {problem}"
    assert not (tmp_path / "datasets" / "mini").exists()


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


# --- archive limits (zip bombs) ----------------------------------------------------------


def write_zip(path: Path, members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression) as zf:
        zf.writestr("mini/corpus.jsonl", '{"_id": "d", "text": "t"}\n')
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def archive_limits(**values) -> beir.ArchiveLimits:
    return beir.ArchiveLimits.from_env(PREFIX, **values)


def assert_nothing_extracted(root: Path) -> None:
    assert not root.exists() or list(root.iterdir()) == [], "a refused archive left files"


def refusal(tmp_path: Path, members: dict[str, bytes], **values) -> str:
    """Extract an archive of `members` under limits `values`: the refusal's message, with the
    archive's path as `{zip}`; nothing may be left extracted."""
    zipped = write_zip(tmp_path / "a.zip", members)
    with pytest.raises(beir.ArchiveError) as err:
        beir.extract_archive(zipped, tmp_path / "out", "mini", archive_limits(**values))
    assert_nothing_extracted(tmp_path / "out")
    return str(err.value).replace(str(zipped), "{zip}")


class TestArchiveLimits:
    @pytest.mark.parametrize(("extra", "limit"), [(4, 4), (9, 5), (20, 1)])
    def test_too_many_members(self, tmp_path, extra, limit):
        members = {f"mini/f{i}.tsv": b"x" for i in range(extra)}
        assert refusal(tmp_path, members, max_members=limit) == (
            f"{{zip}}: {extra + 1} members, more than the limit of {limit} ({PREFIX}_MAX_MEMBERS)"
        )

    @pytest.mark.parametrize(("size", "limit"), [(101, 100), (5000, 1000), (1 << 16, 1 << 15)])
    def test_oversize_member(self, tmp_path, size, limit):
        members = {"mini/qrels/test.tsv": os.urandom(size)}
        assert refusal(tmp_path, members, max_member_bytes=limit) == (
            f"{{zip}}: member 'mini/qrels/test.tsv': more than the limit of {limit} extracted "
            f"bytes ({PREFIX}_MAX_MEMBER_BYTES)"
        )

    @pytest.mark.parametrize(("parts", "limit"), [(2, 150), (5, 400), (10, 900)])
    def test_total_extracted_size(self, tmp_path, parts, limit):
        members = {f"mini/p{i}.tsv": os.urandom(100) for i in range(parts)}
        assert refusal(tmp_path, members, max_total_bytes=limit) == (
            f"{{zip}}: all members: more than the limit of {limit} extracted bytes "
            f"({PREFIX}_MAX_TOTAL_BYTES)"
        )

    @pytest.mark.parametrize(("size", "max_ratio"), [(2 << 20, 200), (4 << 20, 100), (1 << 20, 50)])
    def test_zip_bomb_compression_ratio(self, tmp_path, size, max_ratio):
        message = refusal(tmp_path, {"mini/corpus2.jsonl": b"\0" * size}, max_ratio=max_ratio)
        info = zipfile.ZipFile(tmp_path / "a.zip").getinfo("mini/corpus2.jsonl")
        ratio = info.file_size / info.compress_size
        assert ratio > 500  # deflate packs zeros about 1000 to 1
        assert message == (
            f"{{zip}}: member 'mini/corpus2.jsonl' expands {ratio:.0f} times, more than the "
            f"limit of {max_ratio} ({PREFIX}_MAX_RATIO) (a zip bomb?)"
        )

    @pytest.mark.parametrize("declared", [1, 10, 500])
    def test_a_member_lying_about_its_size_is_refused(self, tmp_path, declared):
        zipped = write_zip(tmp_path / "liar.zip", {"mini/x.tsv": b"y" * 1000}, zipfile.ZIP_STORED)
        raw = bytearray(zipped.read_bytes())
        offset = raw.index(b"mini/x.tsv")  # the local header's name; its sizes sit before
        struct.pack_into("<I", raw, offset - 30 + 22, declared)
        central = raw.index(b"PK\x01\x02", offset)
        central = raw.index(b"PK\x01\x02", central + 4)  # the second entry: mini/x.tsv
        struct.pack_into("<I", raw, central + 24, declared)
        zipped.write_bytes(bytes(raw))
        with pytest.raises(beir.ArchiveError) as err:
            beir.extract_archive(zipped, tmp_path / "out", "mini")
        assert str(err.value) == (
            f"{zipped}: not a readable zip archive (Bad CRC-32 for file 'mini/x.tsv')"
        )
        assert_nothing_extracted(tmp_path / "out")

    @pytest.mark.parametrize("data", [b"", b"not a zip", b"PK\x03\x04" + b"\0" * 40])
    def test_a_file_that_is_not_a_zip(self, tmp_path, data):
        zipped = tmp_path / "junk.zip"
        zipped.write_bytes(data)
        with pytest.raises(beir.ArchiveError) as err:
            beir.extract_archive(zipped, tmp_path / "out", "mini")
        assert str(err.value) == f"{zipped}: not a readable zip archive (File is not a zip file)"

    def test_a_real_beir_archive_passes_the_default_limits(self, beir_mini, tmp_path):
        zipped = tmp_path / "mini.zip"
        zipped.write_bytes(make_beir_zip("mini", beir_mini))
        assert (beir.extract_archive(zipped, tmp_path / "out", "mini") / "corpus.jsonl").exists()

    @pytest.mark.parametrize(
        ("variable", "value", "field"),
        [("MAX_MEMBERS", "7", "max_members"), ("MAX_RATIO", "12.5", "max_ratio")],
    )
    def test_limits_come_from_the_environment(self, monkeypatch, variable, value, field):
        monkeypatch.setenv(f"{PREFIX}_{variable}", value)
        assert str(getattr(beir.ArchiveLimits.from_env(PREFIX), field)) == value


# --- download deadline and size ------------------------------------------------------------


class TestDownloadLimits:
    @pytest.mark.parametrize("phase", ["stall", "headers", "body"])
    def test_a_trickling_mirror_stops_at_the_deadline(self, scripted, archive_cache, phase):
        scripted.route("/mini.zip", trickle(phase, interval_s=0.05))
        cache, good = archive_cache
        with pytest.raises(NetworkError) as err:
            beir.fetch_archive(
                "mini", cache, base=scripted.url, expected_md5="2" * 32, timeout_s=0.6, attempts=1
            )
        assert str(err.value) == (
            f"{scripted.url}/mini.zip: failed after 1 attempt(s): no complete response within "
            "the 0.6 s deadline (RAGEVAL_BEIR_DEADLINE_S)"
        )
        assert (cache / "mini.zip").read_bytes() == good and not list(cache.glob(".*.part"))

    @pytest.mark.parametrize(("size", "cap"), [(2000, 1000), (1001, 1000), (1 << 16, 1 << 12)])
    def test_an_oversized_archive_is_refused(self, scripted, archive_cache, monkeypatch, size, cap):
        monkeypatch.setenv("RAGEVAL_BEIR_MAX_RESPONSE_BYTES", str(cap))
        scripted.route("/mini.zip", reply(200, os.urandom(size)))
        cache, good = archive_cache
        with pytest.raises(NetworkError) as err:
            beir.fetch_archive("mini", cache, base=scripted.url, expected_md5="2" * 32)
        assert str(err.value) == (
            f"{scripted.url}/mini.zip: the response exceeds the {cap}-byte limit "
            "(RAGEVAL_BEIR_MAX_RESPONSE_BYTES)"
        )
        assert (cache / "mini.zip").read_bytes() == good and not list(cache.glob(".*.part"))

    @pytest.mark.parametrize("deadline", ["0.4", "0.7"])
    def test_the_deadline_is_overridable_from_the_environment(
        self, scripted, tmp_path, monkeypatch, deadline
    ):
        monkeypatch.setenv("RAGEVAL_BEIR_DEADLINE_S", deadline)
        monkeypatch.setenv("RAGEVAL_BEIR_ATTEMPTS", "1")
        scripted.route("/mini.zip", trickle("body", interval_s=0.05))
        with pytest.raises(NetworkError, match=f"within the {deadline} s deadline"):
            beir.fetch_archive("mini", tmp_path, base=scripted.url, expected_md5="2" * 32)


@pytest.fixture
def archive_cache(tmp_path) -> tuple[Path, bytes]:
    """A cache holding an archive that does not match the md5 asked for: a download happens,
    and when it fails, this file must be left as it was."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "mini.zip").write_bytes(b"older archive")
    return cache, b"older archive"

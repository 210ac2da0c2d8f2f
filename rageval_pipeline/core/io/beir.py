"""BEIR archives: the official registry, a verified cached download, and safe extraction.

BEIR's own loader never checks its archives; we check every one against the md5 that BEIR's
dataset table publishes, before the archive is used and before it replaces a cached copy.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from rageval_pipeline.core.errors import ArchiveError
from rageval_pipeline.core.io import net
from rageval_pipeline.core.io.net import NetLimits
from rageval_pipeline.core.settings.limits import (
    BEIR_DOWNLOAD,
    BEIR_DOWNLOAD_DEFAULTS,
    ArchiveLimits,
)
from rageval_pipeline.core.settings.locations import Locations


@dataclass(frozen=True)
class BeirDataset:
    """A public BEIR dataset: its archive's md5, its splits, and its evaluation convention."""

    md5: str
    splits: tuple[str, ...]
    # The queries are also corpus documents (ArguAna's counter-arguments, Quora's duplicate
    # questions): BEIR's evaluation drops a retrieved document whose id is the query's id, so a
    # query does not find itself. docs/measures.md, "Dataset conventions".
    ignore_identical_ids: bool = False


# md5, splits and convention of each public archive, from the dataset table in BEIR's README
# (beir-cellar/beir).
BEIR_DATASETS: dict[str, BeirDataset] = {
    "msmarco": BeirDataset("444067daf65d982533ea17ebd59501e4", ("train", "dev", "test")),
    "trec-covid": BeirDataset("ce62140cb23feb9becf6270d0d1fe6d1", ("test",)),
    "nfcorpus": BeirDataset("a89dba18a62ef92f7d323ec890a0d38d", ("train", "dev", "test")),
    "nq": BeirDataset("d4d3d2e48787a744b6f6e691ff534307", ("test",)),
    "hotpotqa": BeirDataset("f412724f78b0d91183a0e86805e16114", ("train", "dev", "test")),
    "fiqa": BeirDataset("17918ed23cd04fb15047f73e6c3bd9d9", ("train", "dev", "test")),
    "arguana": BeirDataset("8ad3e3c2a5867cdced806d6503f29b99", ("test",), True),
    "webis-touche2020": BeirDataset("46f650ba5a527fc69e0a6521c5a23563", ("test",)),
    "cqadupstack": BeirDataset("4e41456d7df8ee7760a7f866133bda78", ("test",)),
    "quora": BeirDataset("18fb154900ba42a600f84b839c173167", ("dev", "test"), True),
    "dbpedia-entity": BeirDataset("c2a39eb420a3164af735795df012ac2c", ("dev", "test")),
    "scidocs": BeirDataset("38121350fc3a4d2f48850f6aff52e4a9", ("test",)),
    "fever": BeirDataset("5a818580227bfb4b35bb6fa46d9b6c03", ("train", "dev", "test")),
    "climate-fever": BeirDataset("8b66f0a9126c521bae2bde127b4dc99d", ("test",)),
    "scifact": BeirDataset("5f7d1de60b170fc8027bb7898e2efca1", ("train", "test")),
}
BEIR_MD5: dict[str, str] = {name: d.md5 for name, d in BEIR_DATASETS.items()}


def ignores_identical_ids(dataset: str) -> bool:
    """Whether `dataset` drops retrieved documents whose id is the query's (registry)."""
    entry = BEIR_DATASETS.get(dataset)
    return entry is not None and entry.ignore_identical_ids


_CHUNK = 1 << 20


@dataclass(frozen=True)
class FetchResult:
    path: Path
    url: str
    md5: str
    downloaded: bool  # False when a verified cached copy was used
    bytes: int
    seconds: float


def base_url() -> str:
    """The mirror from RAGEVAL_BEIR_MIRROR when set, else BEIR's official host."""
    return Locations.from_env().beir_base_url


def archive_url(name: str, base: str | None = None) -> str:
    return f"{(base or base_url()).rstrip('/')}/{name}.zip"


def md5_of(path: Path) -> str:
    digest = hashlib.md5()
    with path.open("rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def download_limits(**overrides: float | None) -> NetLimits:
    """BEIR's download limits: the defaults, then `overrides` not None, then the environment."""
    given = {k: v for k, v in overrides.items() if v is not None}
    return NetLimits.from_env(BEIR_DOWNLOAD, **(BEIR_DOWNLOAD_DEFAULTS | given))


def fetch_archive(
    name: str,
    cache_dir: Path,
    *,
    base: str | None = None,
    expected_md5: str | None = None,
    attempts: int | None = None,
    backoff_s: float | None = None,
    timeout_s: float | None = None,
    log: Callable[[str], None] = lambda _msg: None,
) -> FetchResult:
    """Return `cache_dir/{name}.zip`, downloading it only when no verified copy is cached.

    The download goes through `core.io.net` (`download_limits`: `timeout_s` is the TOTAL deadline
    of one attempt, default an hour). It streams into a temp file beside the target, renamed
    over it only after its md5 matches, so a failed or corrupt download never replaces a good
    cached archive.
    """
    url = archive_url(name, base)
    expected = expected_md5 or BEIR_MD5.get(name)
    if expected is None:
        raise ArchiveError(
            url, f"no md5 is known for BEIR dataset {name!r}; known: {sorted(BEIR_MD5)}"
        )
    limits = download_limits(attempts=attempts, backoff_s=backoff_s, deadline_s=timeout_s)
    target = cache_dir / f"{name}.zip"
    if target.exists() and md5_of(target) == expected:
        log(f"{target} is cached and its md5 {expected} verifies; not downloading")
        return FetchResult(target, url, expected, False, target.stat().st_size, 0.0)

    cache_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=cache_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        reply = net.download(url, tmp, limits, progress=_progress(net.redact_url(url), log))
        actual = md5_of(tmp)
        if actual != expected:
            raise ArchiveError(
                reply.url,
                f"md5 mismatch: expected {expected}, got {actual}; "
                f"the cached archive (if any) was left untouched",
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    log(
        f"downloaded {reply.url} ({reply.size / 1e6:.1f} MB in {reply.elapsed_s:.1f} s, "
        f"{reply.attempts} attempt(s)), md5 {expected} verified"
    )
    return FetchResult(target, url, expected, True, reply.size, reply.elapsed_s)


def _progress(url: str, log: Callable[[str], None]) -> Callable[[int, int | None], None]:
    """A progress callback logging every quarter of a download of known size."""
    next_report = [0.0]

    def report(done: int, total: int | None) -> None:
        if total and done / total >= next_report[0]:
            log(f"{url}: {done / 1e6:.1f} of {total / 1e6:.1f} MB")
            next_report[0] += 0.25

    return report


def extract_archive(
    archive: Path, dest_root: Path, name: str, limits: ArchiveLimits | None = None
) -> Path:
    """Extract `archive` into `dest_root/{name}` and return that folder (BEIR layout).

    Every member is checked before anything is written: no path outside the folder (absolute,
    `..`), no symlink or special file, and `limits` (default `ArchiveLimits.from_env`) on the
    member count, each member's and the total extracted size, and the compression ratio. The
    copy counts bytes too, so a member that lies about its size stops at its limit. Extraction
    goes to a temp folder renamed into place: a half-extracted dataset is never visible, and an
    existing extraction is replaced only after the new one is complete.
    """
    limits = limits or ArchiveLimits.from_env()
    dest_root.mkdir(parents=True, exist_ok=True)
    final = dest_root / name
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=dest_root))
    try:
        try:
            with zipfile.ZipFile(archive) as zf:
                members = zf.infolist()
                _check_members(archive, members, limits)
                for member in members:
                    _extract_member(archive, zf, member, staging, limits)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError) as exc:
            raise ArchiveError(archive, f"not a readable zip archive ({exc})") from None
        # BEIR archives hold one top folder named after the dataset.
        inner = staging / name
        source = inner if inner.is_dir() else staging
        if not (source / "corpus.jsonl").exists():
            raise ArchiveError(archive, f"no {name}/corpus.jsonl inside; not a BEIR archive")
        old = None
        if final.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{name}.old.", dir=dest_root))
            os.replace(final, old / name)
        os.replace(source, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


def _check_members(archive: Path, members: list[zipfile.ZipInfo], limits: ArchiveLimits) -> None:
    """Refuse the whole archive before writing anything if one member or the sum is unsafe."""
    if len(members) > limits.max_members:
        raise ArchiveError(
            archive,
            f"{len(members)} members, more than the limit of {limits.max_members}"
            f"{limits.hint('max_members')}",
        )
    total = 0
    for member in members:
        _check_member(archive, member, limits)
        total += member.file_size
        if total > limits.max_total_bytes:
            raise ArchiveError(archive, _too_big("all members", limits, "max_total_bytes"))


def _check_member(archive: Path, member: zipfile.ZipInfo, limits: ArchiveLimits) -> None:
    path = PurePosixPath(member.filename)
    if path.is_absolute() or ".." in path.parts or member.filename.startswith("\\"):
        raise ArchiveError(archive, f"unsafe member path {member.filename!r}")
    # Unix mode lives in the high 16 bits: 0o120000 marks a symlink; only files and folders.
    kind = (member.external_attr >> 16) & 0o170000
    if kind == 0o120000:
        raise ArchiveError(archive, f"member {member.filename!r} is a symlink")
    if kind not in (0, 0o100000, 0o040000):
        raise ArchiveError(archive, f"member {member.filename!r} is not a file or folder")
    if member.file_size > limits.max_member_bytes:
        raise _oversize(archive, member, limits)
    ratio = member.file_size / max(member.compress_size, 1)
    if member.file_size >= limits.ratio_min_bytes and ratio > limits.max_ratio:
        raise ArchiveError(
            archive,
            f"member {member.filename!r} expands {ratio:.0f} times, more than the limit of "
            f"{limits.max_ratio:g}{limits.hint('max_ratio')} (a zip bomb?)",
        )


def _too_big(what: str, limits: ArchiveLimits, name: str) -> str:
    return (
        f"{what}: more than the limit of {getattr(limits, name)} extracted bytes{limits.hint(name)}"
    )


def _oversize(archive: Path, member: zipfile.ZipInfo, limits: ArchiveLimits) -> ArchiveError:
    what = f"member {member.filename!r}"
    return ArchiveError(archive, _too_big(what, limits, "max_member_bytes"))


def _extract_member(
    archive: Path,
    zf: zipfile.ZipFile,
    member: zipfile.ZipInfo,
    staging: Path,
    limits: ArchiveLimits,
) -> None:
    target = staging / member.filename
    try:
        if member.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        out = target.open("xb")
    except (FileExistsError, IsADirectoryError, NotADirectoryError):
        raise ArchiveError(archive, f"member {member.filename!r} collides with another") from None
    written = 0
    with zf.open(member) as source, out:
        while block := source.read(_CHUNK):
            written += len(block)
            if written > min(member.file_size, limits.max_member_bytes):
                raise _oversize(archive, member, limits)
            out.write(block)

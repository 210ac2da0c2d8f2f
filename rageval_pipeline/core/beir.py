"""BEIR archives: the official registry, a verified cached download, and safe extraction.

BEIR's own loader never checks its archives; we check every one against the md5 that BEIR's
dataset table publishes, before the archive is used and before it replaces a cached copy.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import httpx

OFFICIAL_BASE_URL = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets"
MIRROR_ENV = "RAGEVAL_BEIR_MIRROR"


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


# Transient failures worth another attempt; anything else (404, 403, ...) is final.
_RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}
_CHUNK = 1 << 20


class ArchiveError(RuntimeError):
    """A download or an archive that cannot be used; the message names the URL or file."""


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
    return (os.environ.get(MIRROR_ENV) or OFFICIAL_BASE_URL).rstrip("/")


def archive_url(name: str, base: str | None = None) -> str:
    return f"{(base or base_url()).rstrip('/')}/{name}.zip"


def md5_of(path: Path) -> str:
    digest = hashlib.md5()
    with path.open("rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def fetch_archive(
    name: str,
    cache_dir: Path,
    *,
    base: str | None = None,
    expected_md5: str | None = None,
    attempts: int = 4,
    backoff_s: float = 1.0,
    timeout_s: float = 60.0,
    log: Callable[[str], None] = lambda _msg: None,
) -> FetchResult:
    """Return `cache_dir/{name}.zip`, downloading it only when no verified copy is cached.

    The download streams into a temp file beside the target and is renamed over it only after
    its md5 matches, so a failed or corrupt download never replaces a good cached archive.
    """
    expected = expected_md5 or BEIR_MD5.get(name)
    if expected is None:
        raise ArchiveError(f"no md5 is known for BEIR dataset {name!r}; known: {sorted(BEIR_MD5)}")
    url = archive_url(name, base)
    target = cache_dir / f"{name}.zip"
    started = time.perf_counter()
    if target.exists() and md5_of(target) == expected:
        log(f"{target} is cached and its md5 {expected} verifies; not downloading")
        return FetchResult(target, url, expected, False, target.stat().st_size, 0.0)

    cache_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=cache_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        size = _download(
            url, tmp, attempts=attempts, backoff_s=backoff_s, timeout_s=timeout_s, log=log
        )
        actual = md5_of(tmp)
        if actual != expected:
            raise ArchiveError(
                f"md5 mismatch for {url}: expected {expected}, got {actual}; "
                f"the cached archive (if any) was left untouched"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    seconds = time.perf_counter() - started
    log(f"downloaded {url} ({size / 1e6:.1f} MB in {seconds:.1f} s), md5 {expected} verified")
    return FetchResult(target, url, expected, True, size, seconds)


def _download(
    url: str,
    dest: Path,
    *,
    attempts: int,
    backoff_s: float,
    timeout_s: float,
    log: Callable[[str], None],
) -> int:
    last: Exception | None = None
    for attempt in range(1, attempts + 1):
        try:
            return _stream(url, dest, timeout_s=timeout_s, log=log)
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code not in _RETRY_STATUS:
                raise ArchiveError(
                    f"download of {url} failed: HTTP {exc.response.status_code}"
                ) from exc
            last = exc
        except httpx.TransportError as exc:
            last = exc
        if attempt < attempts:
            wait = backoff_s * 2 ** (attempt - 1)
            log(f"attempt {attempt}/{attempts} for {url} failed ({last}); retrying in {wait:.1f} s")
            time.sleep(wait)
    raise ArchiveError(f"download of {url} failed after {attempts} attempts: {last}")


def _stream(url: str, dest: Path, *, timeout_s: float, log: Callable[[str], None]) -> int:
    done = 0
    next_report = 0.0
    with httpx.stream("GET", url, timeout=timeout_s, follow_redirects=True) as response:
        response.raise_for_status()
        total = int(response.headers.get("content-length") or 0)
        with dest.open("wb") as out:
            for block in response.iter_bytes(_CHUNK):
                out.write(block)
                done += len(block)
                if total and done / total >= next_report:
                    log(f"{url}: {done / 1e6:.1f} of {total / 1e6:.1f} MB")
                    next_report += 0.25
    return done


def extract_archive(archive: Path, dest_root: Path, name: str) -> Path:
    """Extract `archive` into `dest_root/{name}` and return that folder (BEIR layout).

    Refuses members that would land outside the folder (absolute paths, `..`) and symlinks,
    extracts into a temp folder and renames it into place, so a half-extracted dataset is
    never visible. An existing extraction is replaced only after the new one is complete.
    """
    dest_root.mkdir(parents=True, exist_ok=True)
    final = dest_root / name
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=dest_root))
    try:
        with zipfile.ZipFile(archive) as zf:
            for member in zf.infolist():
                _check_member(archive, member)
            zf.extractall(staging)
        # BEIR archives hold one top folder named after the dataset.
        inner = staging / name
        source = inner if inner.is_dir() else staging
        if not (source / "corpus.jsonl").exists():
            raise ArchiveError(f"{archive}: no {name}/corpus.jsonl inside; not a BEIR archive")
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


def _check_member(archive: Path, member: zipfile.ZipInfo) -> None:
    path = PurePosixPath(member.filename)
    if path.is_absolute() or ".." in path.parts or member.filename.startswith("\\"):
        raise ArchiveError(f"{archive}: unsafe member path {member.filename!r}")
    # Unix mode lives in the high 16 bits; 0o120000 marks a symlink.
    if (member.external_attr >> 16) & 0o170000 == 0o120000:
        raise ArchiveError(f"{archive}: member {member.filename!r} is a symlink")

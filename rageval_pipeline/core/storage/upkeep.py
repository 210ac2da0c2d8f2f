"""Looking after a lake (`rageval lake check|repair|gc|compact`, docs/deploy.md "Lake upkeep").

- `problems`: every commit that cannot be used, each as the one line a reader would stop on:
  a commit file not whole or naming a file outside the lake, or a live file missing or cut.
- `repair`: drops (deletes) those commit files, and only those, until none is left: what a
  dropped commit added is then read by nobody (its rows are lost: they could not be read
  anyway), and a compaction dropped gives back the files it replaced where they still exist.
- `garbage` / `collect`: files no commit keeps live, older than an age floor. A killed writer
  leaves Parquet files no commit names (they appear before the commit, which never came);
  a compaction leaves the files it replaced. A writer's files are young while it writes, and
  a reader lists commits before opening files, so only files unreferenced for longer than the
  floor (default a day) are deleted: a live writer or a slow read never loses one, and
  never a file written since the oldest open claim (a writer still writing) whatever the floor.
- `compact`: `Lake.compact` on demand, for any table with at least `at` live files.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rageval_pipeline.core.storage.commits import (
    SEQUENCE,
    Claims,
    LakeError,
    listing,
    live_files,
    modified,
)
from rageval_pipeline.core.storage.lake import COMMITS, Lake, schemas

GC_MIN_AGE_S = 24 * 3600.0  # a file unreferenced for less than this is kept
CLAIM_SKEW_S = 2.0  # S3's LastModified has 1 s resolution: a writer's files are kept from here


def problems(lake: Lake) -> list[LakeError]:
    """Every commit that cannot be used, oldest first: unreadable ones, then (over the good
    ones) the first one naming a missing or cut live file, repeated without it."""
    loaded = lake.load_commits()
    found = [c for c in loaded.values() if isinstance(c, LakeError)]
    good = [c for c in loaded.values() if not isinstance(c, LakeError)]
    while (bad := lake.damaged(good)) is not None:
        found.append(bad)
        good = [c for c in good if lake.shown(f"{COMMITS}/{c['commit']}.json") != bad.commit]
    return found


def repair(lake: Lake, *, dry_run: bool = False) -> list[LakeError]:
    """Drop every commit `problems` finds (or only list them, with `dry_run`)."""
    found = problems(lake)
    if not dry_run:
        for problem in found:
            name = problem.commit.rsplit("/", 1)[-1]
            lake.fs.rm_file(f"{lake.root}/{COMMITS}/{name}")
    return found


@dataclass(frozen=True)
class Garbage:
    """A file no commit keeps live, and since when (s since the epoch)."""

    path: str  # under the lake's root
    since: float


def garbage(lake: Lake, *, min_age_s: float = GC_MIN_AGE_S) -> list[Garbage]:
    """Files under the tables' folders that no commit keeps live, unreferenced for at least
    `min_age_s`: since the commit that replaced them, or (named by none) since written. A
    stray temp file of a killed commit counts too. Never a file written since the oldest
    writer still writing claimed its commit's number (its files precede its commit). Refuses
    while a commit is unreadable, since the files it names would look unreferenced."""
    if not min_age_s >= 0:  # NaN fails this too
        raise ValueError(f"min_age_s must be a number >= 0, not {min_age_s}")
    commits = lake.commits()
    live = {f for files in live_files(commits).values() for f in files}
    entries = listing(lake.fs, f"{lake.root}/{COMMITS}", lake.location)
    written = {_stem(p): modified(info) for p, info in entries.items()}
    named: dict[str, float | None] = {}  # file -> time of the last commit naming it
    for c in commits:
        for files in [*c["files"].values(), *c.get("replaces", {}).values()]:
            named.update(dict.fromkeys(files, written.get(c["commit"])))
    now, found = time.time(), []
    committed = {int(m[1]) for c in commits if (m := SEQUENCE.fullmatch(c["commit"]))}
    writing = Claims(entries).open_since(committed, now)
    floor = now - min_age_s if writing is None else min(now - min_age_s, writing - CLAIM_SKEW_S)
    folders = [f"{lake.root}/{t}" for t in schemas()] + [f"{lake.root}/{COMMITS}"]
    for folder in folders:
        lake.fs.invalidate_cache(folder)
        for path, info in sorted(lake.fs.find(folder, detail=True).items()):
            rel = path.removeprefix(lake.root).lstrip("/")
            if rel in live or (rel.startswith(f"{COMMITS}/") and not rel.endswith(".tmp")):
                continue
            since = named[rel] if rel in named else modified(info)
            if since is not None and since <= floor:
                found.append(Garbage(rel, since))
    return found


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".json")


def collect(lake: Lake, *, min_age_s: float = GC_MIN_AGE_S, dry_run: bool = False) -> list[str]:
    """Delete (or with `dry_run` only list) the `garbage` files; their paths under the root."""
    found = [g.path for g in garbage(lake, min_age_s=min_age_s)]
    if found and not dry_run:
        lake.fs.rm([f"{lake.root}/{path}" for path in found])
    return found


def compact(lake: Lake, *, at: int) -> dict[str, int]:
    """Fold each table with `at` live files or more into one; the tables folded, by files."""
    before = live_files(lake.commits())
    lake.compact(at=at)
    return {table: len(files) for table, files in before.items() if len(files) >= at}

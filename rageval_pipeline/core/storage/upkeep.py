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
  floor (default a day) are deleted: a live writer or a slow read never loses one.
- `compact`: `Lake.compact` on demand, for any table with at least `at` live files.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rageval_pipeline.core.storage.commits import LakeError, live_files
from rageval_pipeline.core.storage.lake import COMMITS, Lake, schemas

GC_MIN_AGE_S = 24 * 3600.0  # a file unreferenced for less than this is kept


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
    stray temp file of a killed commit counts too. Refuses while a commit is unreadable,
    since the files it names would look unreferenced."""
    commits = lake.commits()
    live = {f for files in live_files(commits).values() for f in files}
    named: dict[str, float] = {}  # file -> time of the last commit naming it
    for c in commits:
        for files in [*c["files"].values(), *c.get("replaces", {}).values()]:
            named.update(dict.fromkeys(files, int(c["commit"][:20]) / 1e9))
    now, found = time.time(), []
    folders = [f"{lake.root}/{t}" for t in schemas()] + [f"{lake.root}/{COMMITS}"]
    for folder in folders:
        lake.fs.invalidate_cache(folder)
        for path, info in sorted(lake.fs.find(folder, detail=True).items()):
            rel = path.removeprefix(lake.root).lstrip("/")
            if rel in live or (rel.startswith(f"{COMMITS}/") and not rel.endswith(".tmp")):
                continue
            since = named[rel] if rel in named else _modified(info)
            if since is not None and now - since >= min_age_s:
                found.append(Garbage(rel, since))
    return found


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


def _modified(info: dict) -> float | None:
    """A listed file's last change (s since the epoch), local or object store; None when the
    filesystem says nothing (never deleted then)."""
    for key in ("mtime", "LastModified", "updated", "last_modified"):
        value = info.get(key)
        if value is None:
            continue
        return value.timestamp() if hasattr(value, "timestamp") else float(value)
    return None

"""The dataset partitions: every BEIR dataset with a known md5, plus the bundled suites."""

import json
import re
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

import dagster as dg
import pydantic

from rageval_pipeline.core.io.beir import BEIR_MD5
from rageval_pipeline.core.settings.limits import FileLimits
from rageval_pipeline.core.storage.files import write_text
from rageval_pipeline.core.storage.reuse import content_key
from rageval_pipeline.core.suites import golden, loaders, stamps

# Where a validation's rules come from: a record made by other code or limits is not trusted.
_VALIDATING_CODE = [Path(golden.__file__).parent.parent, Path(__file__).parent]
_RECORD_NAME = re.compile(r"[0-9a-f]{64}")


def _rules() -> str:
    """A digest of what decides whether a suite is valid, besides the suite: this code, the
    file limits in force (`RAGEVAL_MAX_*`), pydantic's and Python's versions."""
    code = sorted(p for folder in _VALIDATING_CODE for p in folder.rglob("*.py"))
    return content_key(
        [stamps.stamp(p) for p in code], FileLimits().model_dump(), pydantic.VERSION, sys.version
    )


def _trusted(record: Path) -> bool:
    """Whether `record` lists files that all keep the size and modification time it lists."""
    try:
        return stamps.hold(json.loads(record.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return False


def _record(record: Path, suites: dict[Path, golden.Suite]) -> None:
    """Record a passed validation: the files it read and their stamps, unless one changed in
    the last second (a quick rewrite may keep its time: core.suites.stamps); the older records
    go. A record is only a shortcut: a folder it cannot be written to leaves the next load to
    validate again."""
    try:
        files = [f for path, suite in suites.items() for f in golden.suite_files(path, suite)]
        read = stamps.stamps(files)
        if read is None or not stamps.settled(read):
            return
        write_text(record, json.dumps(read))
        for older in record.parent.iterdir():  # another process's temp file is not a record
            if older != record and _RECORD_NAME.fullmatch(older.name):
                older.unlink(missing_ok=True)
    except OSError:
        pass


def bundled_suites(suites_dir: Path, records: Path) -> list[str]:
    """Folders under data/suites holding a golden suite or a BEIR layout.

    Golden suites are validated here, when the definitions load, so a malformed suite stops
    every job before any asset runs, with the file, field path and rule in the message. Once
    per content: a validation that passed leaves a record under `records` (a local folder of
    the storage), named by the suites and the rules (`_rules`), listing every file it read
    (suite files, documents, through symlinks) with its size and modification time; the next
    process loading the same definitions (a run worker, a step, the next job) trusts it while
    those stamps hold. Validating the three bundled suites took 0.17 s of CPU at every process
    start (bench/README.md, "Fifth pass").
    """
    if not suites_dir.is_dir():
        return []
    names, suites = [], []
    for folder in sorted(p for p in suites_dir.iterdir() if p.is_dir()):
        if (path := loaders.suite_file(folder)) is not None:
            suites.append(path)
            names.append(folder.name)
        elif (folder / "corpus.jsonl").exists():
            names.append(folder.name)
    key = content_key([str(p.resolve()) for p in suites], _rules())
    record = records / "validated-suites" / key
    if not _trusted(record):
        _record(record, {path.resolve(): golden.load_suite(path) for path in suites})
    return names


def dataset_partitions(suites_dir: Path, records: Path) -> dg.StaticPartitionsDefinition:
    suites = bundled_suites(suites_dir, records)
    clash = set(suites) & set(BEIR_MD5)
    if clash:
        raise ValueError(f"suite folder(s) {sorted(clash)} shadow BEIR dataset names; rename them")
    return dg.StaticPartitionsDefinition(sorted(BEIR_MD5) + suites)


def partitioned_check(
    name: str, *, asset: str | Sequence[str], partitions_def: dg.PartitionsDefinition, **kwargs
) -> dg.AssetCheckSpec:
    """A check evaluated per partition of its asset, so that the UI shows each dataset's latest
    result. Dagster 1.13 calls a check's `partitions_def` a preview: the warning it prints at
    every definitions load is kept out of the jobs' output (docs/deploy.md says so)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return dg.AssetCheckSpec(name, asset=asset, partitions_def=partitions_def, **kwargs)

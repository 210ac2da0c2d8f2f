"""The dataset partitions: every BEIR dataset with a known md5, plus the bundled suites."""

import time
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

import dagster as dg

from rageval_pipeline.core.io.beir import BEIR_MD5
from rageval_pipeline.core.storage.reuse import content_key
from rageval_pipeline.core.storage.warehouse import write_text
from rageval_pipeline.core.suites import golden, loaders

# The code whose rules a validation applied: a record made by other code is not trusted.
_VALIDATING_CODE = Path(golden.__file__).parent.parent


def _settled_stamp(files: Iterable[Path]) -> str | None:
    """The path, size and modification time of each file; None while one changed in the last
    second (a quick rewrite may keep its time: core.suites.golden)."""
    stamps, settled = [], time.time_ns() - golden.SETTLED_NS
    for file in sorted(p for p in files if p.is_file()):
        stat = file.stat()
        if stat.st_mtime_ns >= settled:
            return None
        stamps.append((str(file.resolve()), stat.st_size, stat.st_mtime_ns))
    return content_key(stamps)


def bundled_suites(suites_dir: Path, records: Path) -> list[str]:
    """Folders under data/suites holding a golden suite or a BEIR layout.

    Golden suites are validated here, when the definitions load, so a malformed suite stops
    every job before any asset runs, with the file, field path and rule in the message. Once
    per content: a validation that passed leaves a record under `records` (a local folder of
    the storage) named by the stamps of the suites' files and of the validating code, so the
    next process loading the same definitions (a run worker, a step, the next job) only
    stats the files. Validating the three bundled suites took 0.17 s of CPU at every process
    start (bench/README.md, "Warm re-run").
    """
    if not suites_dir.is_dir():
        return []
    stamp = _settled_stamp([*suites_dir.rglob("*"), *_VALIDATING_CODE.rglob("*.py")])
    record = records / "validated-suites" / stamp if stamp else None
    validated = record is not None and record.exists()
    names = []
    for folder in sorted(p for p in suites_dir.iterdir() if p.is_dir()):
        if (path := loaders.suite_file(folder)) is not None:
            if not validated:
                golden.load_suite(path)
            names.append(folder.name)
        elif (folder / "corpus.jsonl").exists():
            names.append(folder.name)
    if record is not None and not validated:
        write_text(record, "")
        for older in record.parent.iterdir():  # only the latest is ever trusted again
            if older != record:
                older.unlink(missing_ok=True)
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

"""The dataset partitions: every BEIR dataset with a known md5, plus the bundled suites."""

import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import dagster as dg

from rageval_pipeline.core.io.beir import BEIR_MD5
from rageval_pipeline.core.settings import environ
from rageval_pipeline.core.storage.reuse import content_key
from rageval_pipeline.core.suites import loaders
from rageval_pipeline.core.suites.golden import SETTLED_NS, load_suite

_VALIDATED = "SUITES_VALIDATED"


def _settled_stamp(suites_dir: Path) -> str | None:
    """The path, size and modification time of every file of the suites; None while one
    changed in the last second (a quick rewrite may keep its time: core.suites.golden)."""
    stamps, settled = [], time.time_ns() - SETTLED_NS
    for file in sorted(p for p in suites_dir.rglob("*") if p.is_file()):
        stat = file.stat()
        if stat.st_mtime_ns >= settled:
            return None
        stamps.append((str(file.resolve()), stat.st_size, stat.st_mtime_ns))
    return content_key(stamps)


def bundled_suites(suites_dir: Path) -> list[str]:
    """Folders under data/suites holding a golden suite or a BEIR layout.

    Golden suites are validated here, when the definitions load, so a malformed suite stops
    every job before any asset runs, with the file, field path and rule in the message. Once
    per code location start: the process that validated them hands the suites' stamp down to
    its run and step processes, which load the same definitions and validate only if a file
    changed since.
    """
    if not suites_dir.is_dir():
        return []
    stamp = _settled_stamp(suites_dir)
    validated = stamp is not None and environ.handed_down(_VALIDATED) == stamp
    names = []
    for folder in sorted(p for p in suites_dir.iterdir() if p.is_dir()):
        if (path := loaders.suite_file(folder)) is not None:
            if not validated:
                load_suite(path)
            names.append(folder.name)
        elif (folder / "corpus.jsonl").exists():
            names.append(folder.name)
    if stamp is not None:
        environ.hand_down(_VALIDATED, stamp)
    return names


def dataset_partitions(suites_dir: Path) -> dg.StaticPartitionsDefinition:
    suites = bundled_suites(suites_dir)
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

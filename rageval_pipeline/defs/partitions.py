"""The dataset partitions: every BEIR dataset with a known md5, plus the bundled suites."""

import warnings
from collections.abc import Sequence
from pathlib import Path

import dagster as dg

from rageval_pipeline.core.io.beir import BEIR_MD5
from rageval_pipeline.core.suites import loaders
from rageval_pipeline.core.suites.golden import load_suite


def bundled_suites(suites_dir: Path) -> list[str]:
    """Folders under data/suites holding a golden suite or a BEIR layout.

    Golden suites are validated here, when the definitions load, so a malformed suite stops
    every job before any asset runs, with the file, field path and rule in the message.
    """
    if not suites_dir.is_dir():
        return []
    names = []
    for folder in sorted(p for p in suites_dir.iterdir() if p.is_dir()):
        if (path := loaders.suite_file(folder)) is not None:
            load_suite(path)
            names.append(folder.name)
        elif (folder / "corpus.jsonl").exists():
            names.append(folder.name)
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

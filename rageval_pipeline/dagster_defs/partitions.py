"""The dataset partitions: every BEIR dataset with a known md5, plus the bundled suites."""

from pathlib import Path

import dagster as dg

from rageval_pipeline.core.beir import BEIR_MD5


def bundled_suites(suites_dir: Path) -> list[str]:
    """Folders under data/suites holding a suite file or a BEIR layout."""
    if not suites_dir.is_dir():
        return []
    return sorted(
        p.name
        for p in suites_dir.iterdir()
        if p.is_dir()
        and any((p / f).exists() for f in ("suite.json", "suite.yaml", "corpus.jsonl"))
    )


def dataset_partitions(suites_dir: Path) -> dg.StaticPartitionsDefinition:
    suites = bundled_suites(suites_dir)
    clash = set(suites) & set(BEIR_MD5)
    if clash:
        raise ValueError(f"suite folder(s) {sorted(clash)} shadow BEIR dataset names; rename them")
    return dg.StaticPartitionsDefinition(sorted(BEIR_MD5) + suites)

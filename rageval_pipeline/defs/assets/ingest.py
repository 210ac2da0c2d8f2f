"""Ingestion: the BEIR archive (or a bundled suite) into corpus, queries and qrels tables.

The four assets are one multi-asset step: each keeps its own node, code version and
materializations (and can be materialized alone), while a warm re-run pays Dagster's per-step
cost (events, input version lookups) once instead of four times.
"""

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pandas as pd

from rageval_pipeline.core.io import beir
from rageval_pipeline.core.storage.reuse import FrameCache, content_key, folder_key
from rageval_pipeline.core.suites import loaders
from rageval_pipeline.defs.failures import one_line_errors
from rageval_pipeline.defs.resources import CONTENT_KEY, Dataset, Settings

INGEST = "ingest"
ARCHIVE = "beir_archive"
TABLES = {
    "corpus": "Documents (doc_id, title, text, url, metadata) as Parquet.",
    "queries": "Queries with intent/category/difficulty/query_type attributes.",
    "qrels": "Graded judgments of every split; level is document or chunk.",
}


def build_ingest_assets(datasets: dg.PartitionsDefinition) -> list[dg.AssetsDefinition]:
    outs = {
        ARCHIVE: dg.AssetOut(
            dagster_type=dg.Nothing,
            is_required=False,
            code_version=loaders.LOADER_VERSION,
            description="The official BEIR zip (md5-verified, cached) extracted; bundled "
            "suites need none.",
            kinds={"python"},
        ),
    } | {
        name: dg.AssetOut(
            is_required=False,
            code_version=loaders.LOADER_VERSION,
            description=description,
            kinds={"parquet"},
        )
        for name, description in TABLES.items()
    }

    @dg.multi_asset(
        name=INGEST,
        outs=outs,
        partitions_def=datasets,
        group_name=INGEST,
        can_subset=True,
        internal_asset_deps={ARCHIVE: set()} | {name: {dg.AssetKey(ARCHIVE)} for name in TABLES},
    )
    @one_line_errors
    def ingest(context: dg.AssetExecutionContext, settings: Settings) -> Iterator[dg.Output]:
        """The archive, then each selected table."""
        selected = {key.to_user_string() for key in context.selected_asset_keys}
        dataset = settings.dataset(context)
        if ARCHIVE in selected:
            meta = _archive(context, settings, dataset)
            yield dg.Output(None, output_name=ARCHIVE, metadata=meta)
        for name in TABLES:
            if name in selected:
                yield _table(context, settings, dataset, name)

    return [ingest]


def _archive(context: dg.AssetExecutionContext, settings: Settings, dataset: Dataset) -> dict:
    """Fetch (md5-verified, cached) and extract the partition's BEIR archive: its metadata."""
    name, folder, bundled = dataset.name, dataset.folder, dataset.bundled
    if bundled:
        context.log.info(f"{name} is a bundled suite at {folder}: nothing to download")
        return {"source": "bundled suite", "path": dg.MetadataValue.path(str(folder))}
    fetched = beir.fetch_archive(
        name, settings.scratch / "archives", base=settings.beir_mirror, log=context.log.info
    )
    if fetched.downloaded or not (folder / "corpus.jsonl").exists():
        folder = beir.extract_archive(fetched.path, folder.parent, name)
    return {
        "url": dg.MetadataValue.url(fetched.url),
        "md5": fetched.md5,
        "downloaded": fetched.downloaded,
        "bytes": fetched.bytes,
        "path": dg.MetadataValue.path(str(folder)),
    }


def table_key(name: str, dataset: str, folder: Path) -> str:
    """The content key of `dataset`'s ingested table `name`: the loaders' version and every file
    of the dataset's folder as it is now (the stored table's `.key` stamp when it is current)."""
    return content_key(loaders.LOADER_VERSION, name, dataset, folder_key(folder))


def _table(
    context: dg.AssetExecutionContext, settings: Settings, dataset: Dataset, name: str
) -> dg.Output:
    """Read again only when a file of the dataset folder or the loaders changed. Reading a
    suite checks its judged spans against the text (a changed one stops ingestion); the qrels
    report the spans whose text moved, re-anchored where it is now."""
    key = table_key(name, dataset.name, dataset.folder)
    cache = FrameCache(settings.cache_dir(INGEST, name, dataset.name))
    df = None if settings.force else cache.get(key)
    reused = df is not None
    if df is None:
        df = loaders.load_part(dataset.folder, name, dataset=dataset.name)
        cache.put(key, df)
    meta = _summary(name, df) | {"reused": reused, CONTENT_KEY: key}
    if name == "qrels" and not reused and (moves := loaders.span_moves(dataset.folder)):
        for line in moves:
            context.log.warning(f"{dataset.name}: {line}")
        meta["spans_moved"] = dg.MetadataValue.md("\n".join(f"- {m}" for m in moves))
    return dg.Output(df, output_name=name, metadata=meta)


def _summary(name: str, df: pd.DataFrame) -> dict:
    meta: dict = {"rows": len(df)}
    if name == "qrels" and len(df):
        meta["splits"] = ", ".join(sorted(df["split"].unique()))
        meta["queries_judged"] = int(df["query_id"].nunique())
        meta["levels"] = ", ".join(sorted(df["level"].unique()))
    return meta

"""The baseline's configuration beside a built-in system: timed on the same queries in the same
run (latency on one machine under one load), and re-run on a suite that changed since the
baseline was recorded (what the gate then checks against; docs/gate.md)."""

from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pandas as pd

from rageval_pipeline.core.gate import Baseline, baseline_path, load_placed
from rageval_pipeline.core.retrieval import Retriever, execute
from rageval_pipeline.core.storage.reuse import content_key, read_stamp, write_stamp
from rageval_pipeline.core.suites import loaders
from rageval_pipeline.core.suites.chunking import ChunkingConfig
from rageval_pipeline.core.systems import TIMING_SAMPLE, SystemConfig, indexed_system
from rageval_pipeline.defs.assets.chunked import chunked
from rageval_pipeline.defs.resources import Dataset, Settings, stamp_path


def build_stamped(
    system: SystemConfig,
    chunks: pd.DataFrame,
    directory: Path,
    settings: Settings,
    key: str,
    log: Callable[[str], None] | None = None,
    *,
    timing: bool = False,
) -> dict:
    """Build `system`'s index of `chunks` (with `timing`, one only to time searches:
    `build_timing_index`) into `directory` and stamp it with `key`; the stamp is cleared first,
    so an index cut short by a killed step is never taken as built."""
    write_stamp(stamp_path(directory), None)
    build = system.build_timing_index if timing else system.build_index
    stats = build(chunks, directory, embeddings_dir=settings.storage / "embeddings", log=log)
    write_stamp(stamp_path(directory), key)
    return stats


def baseline_of(system: SystemConfig, settings: Settings, dataset: str) -> Baseline | None:
    """The system's committed baseline on this dataset and split, if any."""
    path = baseline_path(settings.baselines, dataset, system.name)
    if not path.is_file():
        return None
    baseline = load_placed(settings.baselines, path)
    return baseline if baseline.split == settings.split else None


def baseline_system(
    system: SystemConfig, reference: ChunkingConfig | None, baseline: Baseline | None
) -> SystemConfig | None:
    """The baseline's configuration when it is a built-in indexed one that can be run beside
    the system (docs/gate.md): the system itself when its recorded configuration is the
    baseline's."""
    if not system.indexed or baseline is None or baseline.config is None:
        return None
    if system.recorded_config(reference) == baseline.config:
        return system
    return indexed_system(baseline.config, system.name)


def open_beside(
    context: dg.AssetExecutionContext,
    settings: Settings,
    partition: Dataset,
    system: SystemConfig,
    beside: SystemConfig | None,
    index_dir: Path,
    *,
    timing: bool = True,
) -> Retriever | None:
    """The baseline's configuration, opened to be timed beside `system`: the system's own index
    when the configuration is unchanged, else one of its own, kept by content key: with `timing`
    one only to time it (a dense one embeds TIMING_SAMPLE chunks, not the corpus; the whole
    index serves as well when a re-run built it), else the whole index, whose hits are read."""
    if beside is None:
        return None
    if beside is system:
        return system.open_index(index_dir)
    dataset = partition.name
    corpus = settings.stored("corpus", partition=dataset)
    directory = settings.index_dir(f"{system.name}.baseline", dataset)
    key = content_key(beside.fingerprint(), beside.index_version, corpus.key)
    timing_key = content_key(key, "timing", TIMING_SAMPLE)
    if read_stamp(stamp_path(directory)) not in ({key, timing_key} if timing else {key}) or (
        not directory.is_dir()
    ):
        what = "to time it" if timing else "to re-run it"
        context.log.info(f"{system.name}: building the baseline configuration's index {what}")
        reference = partition.reference
        chunks = chunked(
            settings, dataset, corpus, beside.run_chunking(reference), reference, system
        )
        build_stamped(
            beside, chunks, directory, settings, timing_key if timing else key, timing=timing
        )
    return beside.open_index(directory)


def run_beside(
    context: dg.AssetExecutionContext,
    settings: Settings,
    partition: Dataset,
    system: SystemConfig,
    beside: SystemConfig,
    judged: pd.DataFrame,
    queries: pd.DataFrame,
) -> pd.DataFrame:
    """The run of the baseline's configuration on this suite's judged queries."""
    index_dir = settings.index_dir(system.name, partition.name)
    retriever = open_beside(context, settings, partition, system, beside, index_dir, timing=False)
    asked = loaders.judged_queries(queries, judged, settings.split)
    return execute(retriever.search, asked, settings.depth)

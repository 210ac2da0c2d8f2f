"""What pooling's embedding will cost, before it starts: the texts each dense system would
embed (counted once over the systems), the time by the cost recorded here (no model loaded:
token lengths from characters), and the time measured now on a sample of those very texts
(`embeddings.calibrate`: the model loaded, its warm-up paid, the sample's vectors kept).

Measured, not recorded, decides whether pooling goes on: on this project's shared 2-core
machine the same model embedded 0.8 to 170 chunks a second on one day, with the machine's load
and the texts' lengths, so a figure recorded an hour ago can be 10x off either way; measuring
costs the model's load (4 s quiet, 20-40 s loaded), which going on pays anyway.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rageval_pipeline.core.retrieval.embedding_cost import Recorded, approximate_lengths, plan
from rageval_pipeline.core.suites.chunking import chunk_once
from rageval_pipeline.core.suites.golden import Suite
from rageval_pipeline.core.suites.loaders import suite_tables
from rageval_pipeline.core.systems import SystemConfig


@dataclass(frozen=True)
class Pending:
    """The texts each dense system would embed (system -> key naming the model -> text), each
    under the first system that embeds it (chunkings that cut a text alike share its vector),
    and the cost each system's model recorded here (None: none yet)."""

    texts: dict[str, dict[str, str]]
    recorded: dict[str, Recorded | None]
    systems: Mapping[str, SystemConfig]

    @property
    def counts(self) -> dict[str, int]:
        return {name: len(texts) for name, texts in self.texts.items()}

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class Measured:
    """The whole embedding's seconds as measured now: the model's load, the sample (texts
    embedded, seconds) and the rest at the cost the sample fitted."""

    seconds: float
    load_s: float
    sample: int
    sample_s: float


def pending(suite: Suite, systems: Mapping[str, SystemConfig], embeddings_dir: Path) -> Pending:
    """What the systems would embed: the cost of pooling, known before anything runs."""
    corpus = suite_tables(suite).corpus
    texts, recorded, counted = {}, {}, set()
    for name, system in systems.items():
        if system.indexed:
            chunks = chunk_once(corpus, system.run_chunking(suite.chunking))
            keyed, recorded[name] = system.to_embed(chunks, embeddings_dir)
            if new := {k: t for k, t in keyed.items() if k not in counted}:
                texts[name] = new
                counted |= set(new)
    return Pending(texts, {n: recorded[n] for n in texts}, systems)


def by_record(todo: Pending) -> tuple[float, Recorded] | None:
    """Seconds the embedding should take (model load left out) at the cost each model
    recorded here, and the oldest record; None when a model has recorded none."""
    seconds, oldest = 0.0, None
    for name, texts in todo.texts.items():
        entry, system = todo.recorded[name], todo.systems[name]
        if entry is None:
            return None
        lengths = approximate_lengths(list(texts.values()), entry.cost, system.max_seq_length)
        seconds += entry.cost.seconds(plan(lengths, system.batch_size))
        if oldest is None or entry.recorded_at < oldest.recorded_at:
            oldest = entry
    return (seconds, oldest) if oldest else None


def measure(todo: Pending, embeddings_dir: Path) -> Measured:
    """Load each model and time a sample of the texts it will embed (all of its systems' texts
    together, with the first one's options); the rest of each system's texts at the fitted
    cost with that system's batch size."""
    groups: dict[str, list[str]] = {}  # the cache (model) -> its systems
    for name, texts in todo.texts.items():
        groups.setdefault(next(iter(texts)).split("/")[0], []).append(name)
    seconds = load = sample_s = 0.0
    sample = 0
    for names in groups.values():
        every = {k.split("/", 1)[1]: t for n in names for k, t in todo.texts[n].items()}
        start = time.perf_counter()
        calibration, loaded = todo.systems[names[0]].calibrate(list(every.values()), embeddings_dir)
        seconds += time.perf_counter() - start
        load, sample_s = load + loaded, sample_s + calibration.seconds
        sample += calibration.embedded
        if calibration.cost is None:  # the sample was all of it
            continue
        for name in names:
            keys = (k.split("/", 1)[1] for k in todo.texts[name])
            left = [calibration.lengths[k] for k in keys if k in calibration.lengths]
            seconds += calibration.cost.seconds(plan(left, todo.systems[name].batch_size))
    return Measured(seconds, load, sample, sample_s)

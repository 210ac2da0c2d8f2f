"""A provider client behind a response cache, a concurrency limit, n samples and a dry run.

The cache key is the SHA-256 of (provider, model, sampling parameters, sample number, prompt
hash): a re-run with nothing changed makes no call, and any change (model, temperature, seed,
a word of the prompt) misses. Entries are JSON files under `$RAGEVAL_STORAGE/llm_cache/`,
written atomically, holding the prompt and completion for audit. A dry run calls nothing and
counts the calls and tokens (prompt characters / 4, and at most `max_tokens` out) a run would
spend on what is not cached yet.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import BaseModel

from rageval_pipeline.core.generation.config import ProviderConfig
from rageval_pipeline.core.generation.providers import Client, Completion, client_for
from rageval_pipeline.core.storage import write_text


class Usage(BaseModel):
    """What a run spent (or, dry, would spend); tokens are as reported by the provider."""

    calls: int = 0
    cached: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    dry_run: bool = False


def prompt_hash(prompt: str) -> str:
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def agreement(labels: list) -> float:
    """Share of samples agreeing with the most common label (1.0 when all agree)."""
    return Counter(labels).most_common(1)[0][1] / len(labels) if labels else float("nan")


class LLM:
    def __init__(
        self,
        config: ProviderConfig,
        cache_dir: Path | None,
        *,
        dry_run: bool = False,
        client: Client | None = None,
    ) -> None:
        self.config = config
        self.cache_dir = cache_dir
        self.dry_run = dry_run
        self.client = client or client_for(config)
        self.usage = Usage(dry_run=dry_run)
        self._lock = threading.Lock()

    @property
    def label(self) -> str:
        return f"{self.config.provider}:{self.config.model}"

    def cache_key(self, prompt: str, sample: int) -> str:
        c = self.config
        key = dict(
            provider=c.provider,
            model=c.model,
            params=c.params(),
            sample=sample,
            prompt=prompt_hash(prompt),
        )
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()

    def _path(self, key: str) -> Path | None:
        return None if self.cache_dir is None else self.cache_dir / key[:2] / f"{key}.json"

    def complete(self, prompt: str, sample: int = 0) -> Completion:
        key = self.cache_key(prompt, sample)
        path = self._path(key)
        if path is not None and path.exists():
            with self._lock:
                self.usage.cached += 1
            return Completion.model_validate(json.loads(path.read_text("utf-8"))["completion"])
        if self.dry_run:
            with self._lock:
                self.usage.calls += 1
                self.usage.input_tokens += math.ceil(len(prompt) / 4)
                self.usage.output_tokens += self.config.max_tokens
            return Completion(text="", model=self.config.model)
        completion = self.client.complete(prompt, sample)
        with self._lock:
            self.usage.calls += 1
            self.usage.input_tokens += completion.input_tokens or 0
            self.usage.output_tokens += completion.output_tokens or 0
        if path is not None:
            entry = dict(
                provider=self.config.provider,
                model=self.config.model,
                params=self.config.params(),
                sample=sample,
                prompt=prompt,
                completion=completion.model_dump(),
            )
            write_text(path, json.dumps(entry, ensure_ascii=False, indent=1) + "\n")
        return completion

    def complete_all(self, prompts: list[str], samples: int = 1) -> list[list[Completion]]:
        """`samples` completions of each prompt, at most `concurrency` requests at a time."""
        jobs = [(i, s) for i in range(len(prompts)) for s in range(samples)]
        with ThreadPoolExecutor(max_workers=self.config.concurrency) as pool:
            done = list(pool.map(lambda job: self.complete(prompts[job[0]], job[1]), jobs))
        return [done[i * samples : (i + 1) * samples] for i in range(len(prompts))]

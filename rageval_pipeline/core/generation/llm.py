"""A provider client behind a response cache, a concurrency limit, n samples and a dry run.

The cache key is the SHA-256 of (provider, server URL, model, sampling parameters, sample
number, prompt hash): a re-run with nothing changed makes no call, and any change (another
server under the same model name, temperature, seed, a word of the prompt) misses. Entries are
JSON files under `$RAGEVAL_STORAGE/llm_cache/`, written atomically, holding the prompt and
completion for audit. A dry run calls nothing and
counts the calls and tokens (prompt characters / 4, and at most `max_tokens` out) a run would
spend on what is not cached yet.

One `LLM` serves one step (a Dagster step, a `rageval suggest` command) and holds its total
deadline (`step_deadline_s`, from `RAGEVAL_STEP_DEADLINE_S`), counted from its creation:
past it, `complete_all` cancels the calls in flight, starts no other and raises one line.
Per-attempt limits alone let a provider that drips bytes hold a step for calls x attempts x
the attempt deadline (40 min measured with the defaults).
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections import Counter
from concurrent.futures import FIRST_EXCEPTION, Future, wait
from multiprocessing.pool import ThreadPool
from pathlib import Path

from pydantic import BaseModel

from rageval_pipeline.core.generation.config import GenerationError, ProviderConfig
from rageval_pipeline.core.generation.providers import Client, Completion, client_for
from rageval_pipeline.core.generation.verdicts import Structured
from rageval_pipeline.core.storage.files import write_text


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


class _NotStarted(Exception):
    """A call not started because another had failed."""


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
        self._deadline = time.monotonic() + config.step_deadline_s

    @property
    def label(self) -> str:
        return f"{self.config.provider}:{self.config.model}"

    def cache_key(self, prompt: str, sample: int, output: Structured | None = None) -> str:
        c = self.config
        key = dict(
            provider=c.provider,
            server=c.base_url,  # one model name on two servers may be two models
            model=c.model,
            params=c.params(),
            sample=sample,
            prompt=prompt_hash(prompt),
        )
        if output is not None and c.structured != "off":  # a different request: not a hit
            key["output"] = [output.name, c.structured]
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()

    def _path(self, key: str) -> Path | None:
        return None if self.cache_dir is None else self.cache_dir / key[:2] / f"{key}.json"

    def complete(
        self, prompt: str, sample: int = 0, output: Structured | None = None
    ) -> Completion:
        key = self.cache_key(prompt, sample, output)
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
        completion = self.client.complete(prompt, sample, output)
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

    def complete_all(
        self, prompts: list[str], samples: int = 1, output: Structured | None = None
    ) -> list[list[Completion]]:
        """`samples` completions of each prompt (`complete_jobs`)."""
        done = self.complete_jobs(
            [(prompt, s) for prompt in prompts for s in range(samples)], output
        )
        return [done[i * samples : (i + 1) * samples] for i in range(len(prompts))]

    def complete_jobs(
        self, jobs: list[tuple[str, int]], output: Structured | None = None
    ) -> list[Completion]:
        """The completion of each (prompt, sample number), at most `concurrency` requests at a
        time. The first failure, or the step's deadline, cancels the calls in flight and starts
        no other (a call's failure is raised before the deadline's line). The pool's threads
        are daemons: a call that a cancelled connection leaves sleeping in a retry back-off
        cannot hold the process open."""
        if not jobs:
            return []
        answered = []
        # Set by the first failure in the worker itself: a pool thread that finished a failing
        # call must not take the next job before the main thread has seen the failure.
        stop = threading.Event()

        def one(job: tuple[str, int]) -> Completion:
            if stop.is_set():
                raise _NotStarted
            try:
                completion = self.complete(*job, output)
            except BaseException:
                stop.set()
                raise
            answered.append(job)
            return completion

        futures: list[Future] = [Future() for _ in jobs]
        with ThreadPool(min(self.config.concurrency, len(jobs))) as pool:
            for job, future in zip(jobs, futures, strict=True):
                pool.apply_async(
                    one, (job,), callback=future.set_result, error_callback=future.set_exception
                )
            remaining = max(0.0, self._deadline - time.monotonic())
            _, pending = wait(futures, timeout=remaining, return_when=FIRST_EXCEPTION)
            stop.set()
            failed = [
                f
                for f in futures
                if f.done()
                and f.exception() is not None
                and not isinstance(f.exception(), _NotStarted)
            ]
            if pending:
                self.client.abort()
            if failed:
                failed[0].result()  # raises the first failure in order
            if pending:
                raise GenerationError(
                    f"the step's total deadline of {self.config.step_deadline_s:g} s "
                    f"(RAGEVAL_STEP_DEADLINE_S) passed with {len(answered)} of {len(jobs)} "
                    "call(s) answered: the calls in flight were cancelled, the rest not started"
                )
        return [f.result() for f in futures]

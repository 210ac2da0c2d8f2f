"""Provider configuration from the environment (seed 002's names), answering and judging apart.

The answering model reads `RAG_EVAL_*`; the judge reads `RAG_EVAL_JUDGE_*` first and falls back
to the answering model's value, so one provider serves both unless told otherwise. API keys are
held as `SecretStr` and checked before use: a malformed key (a trailing newline, non-ASCII) is
refused with an error naming the variable, never showing the value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

Provider = Literal["ollama", "anthropic", "openai"]
Role = Literal["answer", "judge"]
# How a verdict or grade is asked for: a JSON schema the provider enforces (OpenAI
# `response_format` json_schema, Ollama `format` schema; Anthropic always uses a forced tool),
# JSON mode only (`json_object`, `format: "json"`), or plain text for servers that refuse both.
Structured = Literal["schema", "json", "off"]

DEFAULTS: dict[str, dict[str, str]] = {
    "ollama": {"base_url": "http://localhost:11434", "model": "llama3.1:8b"},
    "anthropic": {"base_url": "https://api.anthropic.com", "model": "claude-3-5-sonnet-20241022"},
    "openai": {"base_url": "http://localhost:8000/v1", "model": ""},
}
# Any of these set turns the generation group on (see `configured`).
SWITCHES = (
    "RAG_EVAL_PROVIDER",
    "RAG_EVAL_OLLAMA_MODEL",
    "RAG_EVAL_ANTHROPIC_MODEL",
    "RAG_EVAL_OPENAI_MODEL",
    "RAG_EVAL_JUDGE_PROVIDER",
    "RAG_EVAL_JUDGE_MODEL",
)
# Settings read from `RAG_EVAL_<NAME>`, shared by the answering model and the judge.
_TUNING = ("temperature", "seed", "max_tokens", "concurrency", "structured", "step_deadline_s")
_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")  # visible ASCII: what an HTTP header value may hold


class GenerationError(RuntimeError):
    """A generation failure whose message is safe to log: it never holds a secret."""


class ProviderConfig(BaseModel):
    """One model endpoint and the sampling parameters sent with every request."""

    model_config = ConfigDict(frozen=True)

    provider: Provider = "ollama"
    base_url: str
    model: str = Field(min_length=1)
    api_key: SecretStr | None = Field(default=None, repr=False)
    key_variable: str | None = None  # the variable the key came from, for error messages
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    seed: int = 42
    max_tokens: int = Field(512, gt=0)
    stream: bool = False
    structured: Structured = "schema"
    concurrency: int = Field(2, ge=1)
    # Total wall time of one step's calls (Dagster step or `rageval suggest`): past it, calls
    # in flight are cancelled and the rest never start. Per-attempt limits alone add up to
    # calls x attempts x deadline.
    step_deadline_s: float = Field(1800.0, gt=0)

    def params(self) -> dict:
        """The parameters that change an answer: part of the cache key."""
        return dict(temperature=self.temperature, seed=self.seed, max_tokens=self.max_tokens)

    def key(self) -> str:
        """The API key, checked to be a valid header value; GenerationError names the variable."""
        name = self.key_variable or f"RAG_EVAL_{self.provider.upper()}_API_KEY"
        if self.api_key is None or not self.api_key.get_secret_value():
            raise GenerationError(f"{name} is not set: the {self.provider} provider needs a key")
        if not _HEADER_SAFE.fullmatch(self.api_key.get_secret_value()):
            raise GenerationError(
                f"{name} is malformed: a key holds only visible ASCII characters "
                "(no spaces, newlines or non-ASCII; check for a trailing newline)"
            )
        return self.api_key.get_secret_value()


def configured(env: Mapping[str, str] | None = None) -> bool:
    """True when any provider or model variable is set: the generation group is then built."""
    env = os.environ if env is None else env
    return any(env.get(name, "").strip() for name in SWITCHES)


def _get(env: Mapping[str, str], role: Role, suffix: str) -> str | None:
    """`RAG_EVAL_JUDGE_<suffix>` for the judge (falling back), `RAG_EVAL_<suffix>` otherwise."""
    names = [f"RAG_EVAL_JUDGE_{suffix}"] if role == "judge" else []
    for name in [*names, f"RAG_EVAL_{suffix}"]:
        if env.get(name, "") != "":
            return env[name]
    return None


def from_env(role: Role = "answer", env: Mapping[str, str] | None = None) -> ProviderConfig:
    """The answering (`role="answer"`) or judging model's configuration."""
    env = os.environ if env is None else env
    provider = (_get(env, role, "PROVIDER") or "ollama").strip().lower()
    if provider not in DEFAULTS:
        raise GenerationError(
            f"RAG_EVAL_{'JUDGE_' if role == 'judge' else ''}PROVIDER must be one of "
            f"{sorted(DEFAULTS)}, got {provider!r}"
        )
    up = provider.upper()
    # The judge's model: RAG_EVAL_JUDGE_MODEL, else the provider's model variable.
    model = (env.get("RAG_EVAL_JUDGE_MODEL") if role == "judge" else None) or _get(
        env, role, f"{up}_MODEL"
    )
    key_name = f"RAG_EVAL_{up}_API_KEY"
    if role == "judge" and f"RAG_EVAL_JUDGE_{up}_API_KEY" in env:
        key_name = f"RAG_EVAL_JUDGE_{up}_API_KEY"
    tuning = {
        name: env[f"RAG_EVAL_{name.upper()}"]
        for name in _TUNING
        if env.get(f"RAG_EVAL_{name.upper()}")
    }
    stream = env.get("RAG_EVAL_STREAM", "").strip().lower() in ("1", "true", "yes")
    try:
        return ProviderConfig(
            provider=provider,
            base_url=(_get(env, role, f"{up}_BASE_URL") or DEFAULTS[provider]["base_url"]).rstrip(
                "/"
            ),
            model=model or DEFAULTS[provider]["model"],
            api_key=SecretStr(env[key_name]) if key_name in env else None,
            key_variable=key_name,
            stream=stream,
            **tuning,
        )
    except ValueError as exc:  # pydantic: name the variables, never echo input (keys are input)
        fields = [str(e["loc"][0]) for e in getattr(exc, "errors", list)()] or ["model"]
        names = [
            f"RAG_EVAL_{up}_MODEL" if f == "model" else f"RAG_EVAL_{f.upper()}" for f in fields
        ]
        raise GenerationError(
            f"invalid or missing generation setting(s) for the {role} model: {', '.join(names)}"
        ) from None


def second_judge(env: Mapping[str, str] | None = None) -> ProviderConfig | None:
    """The judge's configuration with `RAG_EVAL_SECOND_JUDGE_MODEL` as its model, for the
    calibration's second-judge bias check; None when that variable is unset."""
    env = os.environ if env is None else env
    model = env.get("RAG_EVAL_SECOND_JUDGE_MODEL", "").strip()
    return from_env("judge", env).model_copy(update={"model": model}) if model else None

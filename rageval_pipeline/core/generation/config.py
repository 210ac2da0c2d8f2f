"""Provider configuration from the environment (`RAGEVAL_*`), answering and judging apart.

The answering model reads `RAGEVAL_*`; the judge reads `RAGEVAL_JUDGE_*` first and falls back
to the answering model's value, so one provider serves both unless told otherwise. API keys are
held as `SecretStr` and checked before use: a malformed key (a trailing newline, non-ASCII) is
refused with an error naming the variable, never showing the value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pydantic import ConfigDict, Field, SecretStr

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.settings.providers import (
    PROVIDERS,
    SWITCHES,
    Providers,
    Role,
    Sampling,
)

Provider = Literal["ollama", "anthropic", "openai"]
_SWITCH_FIELDS = tuple(name.removeprefix("RAGEVAL_").lower() for name in SWITCHES)
_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")  # visible ASCII: what an HTTP header value may hold


class GenerationError(RuntimeError):
    """A generation failure whose message is safe to log: it never holds a secret."""


class ProviderConfig(Sampling):
    """One model endpoint and the sampling parameters sent with every request."""

    model_config = ConfigDict(frozen=True)

    provider: Provider = "ollama"
    base_url: str
    model: str = Field(min_length=1)
    api_key: SecretStr | None = Field(default=None, repr=False)
    key_variable: str | None = None  # the variable the key came from, for error messages

    def params(self) -> dict:
        """The parameters that change an answer: part of the cache key."""
        return dict(temperature=self.temperature, seed=self.seed, max_tokens=self.max_tokens)

    def key(self) -> str:
        """The API key, checked to be a valid header value; GenerationError names the variable."""
        name = self.key_variable or f"RAGEVAL_{self.provider.upper()}_API_KEY"
        if self.api_key is None or not self.api_key.get_secret_value():
            raise GenerationError(f"{name} is not set: the {self.provider} provider needs a key")
        if not _HEADER_SAFE.fullmatch(self.api_key.get_secret_value()):
            raise GenerationError(
                f"{name} is malformed: a key holds only visible ASCII characters "
                "(no spaces, newlines or non-ASCII; check for a trailing newline)"
            )
        return self.api_key.get_secret_value()


def configured(env: Mapping[str, str] | None = None) -> bool:
    """True when any provider or model variable is set: the generation group is then built.
    Also when a `RAGEVAL_*` value is bad: the group's steps then report it in one line."""
    try:
        settings = Providers.from_env(env=env)
    except InputError:
        return True
    return any(
        str(getattr(settings, name)).strip()
        for name in _SWITCH_FIELDS
        if name in settings.model_fields_set
    )


def from_env(role: Role = "answer", env: Mapping[str, str] | None = None) -> ProviderConfig:
    """The answering (`role="answer"`) or judging model's configuration (`env` replaces the
    process environment)."""
    try:
        settings = Providers.from_env(env=env)
    except InputError as exc:  # names the variable and the rule, never the value
        raise GenerationError(
            f"invalid generation setting for the {role} model: {exc.field}: {exc.problem}"
        ) from None
    judge = role == "judge"
    provider = ((settings.judge_provider if judge else None) or settings.provider).strip().lower()
    if provider not in PROVIDERS:
        raise GenerationError(
            f"RAGEVAL_{'JUDGE_' if judge else ''}PROVIDER must be one of "
            f"{sorted(PROVIDERS)}, got {provider!r}"
        )
    up = provider.upper()
    # The judge's model: RAGEVAL_JUDGE_MODEL, else the provider's model variable.
    model = (settings.judge_model if judge else None) or settings.setting(role, provider, "model")[
        1
    ]
    key_name, key = settings.setting(role, provider, "api_key")
    try:
        return ProviderConfig(
            provider=provider,
            base_url=str(settings.setting(role, provider, "base_url")[1]).rstrip("/"),
            model=model,
            api_key=key,
            key_variable=key_name,
            **{name: getattr(settings, name) for name in Sampling.model_fields},
        )
    except ValueError as exc:  # pydantic: name the variables, never echo input (keys are input)
        fields = [str(e["loc"][0]) for e in getattr(exc, "errors", list)()] or ["model"]
        names = [f"RAGEVAL_{up}_MODEL" if f == "model" else f"RAGEVAL_{f.upper()}" for f in fields]
        raise GenerationError(
            f"invalid or missing generation setting(s) for the {role} model: {', '.join(names)}"
        ) from None


def second_judge(env: Mapping[str, str] | None = None) -> ProviderConfig | None:
    """The judge's configuration with `RAGEVAL_SECOND_JUDGE_MODEL` as its model, for the
    calibration's second-judge bias check; None when that variable is unset."""
    from rageval_pipeline.core.settings.providers import Labelling

    model = (Labelling.from_env(env=env).second_judge_model or "").strip()
    return from_env("judge", env).model_copy(update={"model": model}) if model else None

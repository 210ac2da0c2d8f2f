"""The LLM provider variables (`RAGEVAL_*`, once `RAG_EVAL_*`): the answering model, the judge
(`RAGEVAL_JUDGE_*`, falling back to the answering model's) and the sampling they share. Keys
are `SecretStr`: never shown by a repr, a dump or an error. An empty variable counts as unset.
`core.generation.config` turns these into one `ProviderConfig` per role."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from rageval_pipeline.core.settings.base import EnvGroup
from rageval_pipeline.core.settings.limits import COUNT, DAY_S
from rageval_pipeline.core.settings.locations import Names, _names

# How a verdict or grade is asked for: a JSON schema the provider enforces (OpenAI
# `response_format` json_schema, Ollama `format` schema; Anthropic always uses a forced tool),
# JSON mode only (`json_object`, `format: "json"`), or plain text for servers that refuse both.
Structured = Literal["schema", "json", "off"]
Role = Literal["answer", "judge"]
PROVIDERS = ("anthropic", "ollama", "openai")
MAX_PRICE = 1e6  # per million tokens: far above any model's


class Sampling(BaseModel):
    """What every request of one model is sent with, and how many run at once."""

    temperature: float = Field(0.0, ge=0.0, le=2.0, description="sampling temperature")
    seed: int = Field(
        42, ge=-(2**63), le=2**63 - 1, description="sampling seed (Anthropic takes none)"
    )
    max_tokens: int = Field(512, gt=0, le=COUNT, description="longest completion, in tokens")
    stream: bool = Field(
        False, description="ask for a streamed response (NDJSON for Ollama, SSE for the others)"
    )
    structured: Structured = Field(
        "schema",
        description="how verdicts and grades are asked for: `schema` (a JSON schema the server "
        "enforces), `json` (JSON mode only) or `off` (plain text)",
    )
    concurrency: int = Field(2, ge=1, le=1024, description="requests in flight at once")
    # Per-attempt limits alone add up to calls x attempts x deadline.
    step_deadline_s: float = Field(
        1800.0,
        gt=0,
        le=DAY_S,
        description="total wall time of one step's calls (a Dagster step, `rageval suggest`); "
        "past it, calls in flight are cancelled and the rest not started",
    )


class Providers(EnvGroup, Sampling):
    """The answering model and the judge. Any of `SWITCHES` set turns the generation group on."""

    model_config = SettingsConfigDict(env_prefix="RAGEVAL_", env_ignore_empty=True)
    renamed: ClassVar[Mapping[str, str]] = {"RAGEVAL_": "RAG_EVAL_"}

    provider: str = Field(
        "ollama", description="the answering model's provider: ollama, anthropic or openai"
    )
    ollama_model: str = Field("llama3.1:8b", description="the ollama model")
    ollama_base_url: str = Field("http://localhost:11434", description="the ollama server")
    ollama_api_key: SecretStr | None = Field(
        None, description="an ollama API key (Ollama takes none: never sent)"
    )
    anthropic_model: str = Field("claude-3-5-sonnet-20241022", description="the anthropic model")
    anthropic_base_url: str = Field("https://api.anthropic.com", description="the anthropic server")
    anthropic_api_key: SecretStr | None = Field(None, description="the anthropic API key")
    openai_model: str = Field("", description="the openai model (required: no default)")
    openai_base_url: str = Field(
        "http://localhost:8000/v1",
        description="the openai server (the part before /chat/completions)",
    )
    openai_api_key: SecretStr | None = Field(
        None, description="the openai API key (optional: a Bearer token)"
    )
    judge_provider: str | None = Field(
        None, description="the judge's provider (default: RAGEVAL_PROVIDER)"
    )
    judge_model: str | None = Field(None, description="the judge's model, whatever its provider")
    judge_ollama_model: str | None = Field(
        None,
        description="the judge's ollama model when RAGEVAL_JUDGE_MODEL is unset "
        "(default: RAGEVAL_OLLAMA_MODEL)",
    )
    judge_ollama_base_url: str | None = Field(
        None, description="the judge's ollama server (default: RAGEVAL_OLLAMA_BASE_URL)"
    )
    judge_ollama_api_key: SecretStr | None = Field(
        None, description="the judge's ollama API key (default: RAGEVAL_OLLAMA_API_KEY)"
    )
    judge_anthropic_model: str | None = Field(
        None,
        description="the judge's anthropic model when RAGEVAL_JUDGE_MODEL is unset "
        "(default: RAGEVAL_ANTHROPIC_MODEL)",
    )
    judge_anthropic_base_url: str | None = Field(
        None, description="the judge's anthropic server (default: RAGEVAL_ANTHROPIC_BASE_URL)"
    )
    judge_anthropic_api_key: SecretStr | None = Field(
        None, description="the judge's anthropic API key (default: RAGEVAL_ANTHROPIC_API_KEY)"
    )
    judge_openai_model: str | None = Field(
        None,
        description="the judge's openai model when RAGEVAL_JUDGE_MODEL is unset "
        "(default: RAGEVAL_OPENAI_MODEL)",
    )
    judge_openai_base_url: str | None = Field(
        None, description="the judge's openai server (default: RAGEVAL_OPENAI_BASE_URL)"
    )
    judge_openai_api_key: SecretStr | None = Field(
        None, description="the judge's openai API key (default: RAGEVAL_OPENAI_API_KEY)"
    )

    def setting(self, role: Role, provider: str, name: str) -> tuple[str, object]:
        """The variable and value of `{provider}_{name}` for `role`: the judge's own when set,
        else the answering model's."""
        own = f"judge_{provider}_{name}"
        if role == "judge" and getattr(self, own) is not None:
            return f"RAGEVAL_{own.upper()}", getattr(self, own)
        shared = f"{provider}_{name}"
        return f"RAGEVAL_{shared.upper()}", getattr(self, shared)


class GenerationScope(EnvGroup):
    """Which systems the generation check answers with; apart from `Providers`, so a bad
    provider value is reported by the steps, not when the definitions load."""

    model_config = SettingsConfigDict(env_prefix="RAGEVAL_", env_ignore_empty=True)
    renamed: ClassVar[Mapping[str, str]] = {"RAGEVAL_": "RAG_EVAL_"}

    systems: Names = Field(
        [], description="comma-separated systems to answer with (default: every system)"
    )

    _split = field_validator("systems", mode="before")(_names)


class Labelling(EnvGroup):
    """LLM relevance labels (`rageval label`, docs/synthetic.md): a second judge for the bias
    check, and token prices for the dry run's cost estimate."""

    model_config = SettingsConfigDict(env_prefix="RAGEVAL_", env_ignore_empty=True)
    renamed: ClassVar[Mapping[str, str]] = {"RAGEVAL_": "RAG_EVAL_"}

    second_judge_model: str | None = Field(
        None, description="a second judge model labelling a sample, for the agreement check"
    )
    price_in: float = Field(
        0.0, ge=0, le=MAX_PRICE, description="price per million input tokens (0: local)"
    )
    price_out: float = Field(0.0, ge=0, le=MAX_PRICE, description="price per million output tokens")
    price_currency: str = Field(
        "USD", min_length=1, description="the currency the prices are in, printed with the cost"
    )
    max_unparseable: float = Field(
        0.1,
        ge=0,
        le=1,
        description="share of unparseable labels above which `rageval label` exits 1",
    )


# Any of these set turns the generation group on (`core.generation.config.configured`).
SWITCHES = (
    "RAGEVAL_PROVIDER",
    "RAGEVAL_OLLAMA_MODEL",
    "RAGEVAL_ANTHROPIC_MODEL",
    "RAGEVAL_OPENAI_MODEL",
    "RAGEVAL_JUDGE_PROVIDER",
    "RAGEVAL_JUDGE_MODEL",
)

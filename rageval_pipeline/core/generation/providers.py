"""Three provider clients, each speaking its own wire format, streamed or not.

- Ollama `POST /api/chat`: one JSON object, or NDJSON lines when streaming.
- Anthropic Messages `POST /v1/messages` (`x-api-key`, `anthropic-version`): one JSON object,
  or server-sent events (`message_start`, `content_block_delta`, `message_delta`, ...).
- OpenAI-compatible `POST {base}/chat/completions` (vLLM, llama.cpp server, LM Studio, hosted):
  one JSON object, or SSE `data:` chunks ending in `data: [DONE]`.

Every request asks for the configured temperature (0 by default) and, where the API accepts
one, a fixed seed (Ollama, OpenAI; Anthropic has none). Token usage is kept when reported.
Transport (deadline, size cap, retries honouring `retry-after`) is `core.net`'s, with limits
from `RAG_EVAL_*` variables (`RAG_EVAL_DEADLINE_S`, `RAG_EVAL_ATTEMPTS`, ...; see
`NetLimits`). Error text never holds the key: the provider's own message is scrubbed of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from pydantic import BaseModel

from rageval_pipeline.core.errors import NetworkError
from rageval_pipeline.core.generation.config import GenerationError, ProviderConfig
from rageval_pipeline.core.net import HttpSession, NetLimits

ANTHROPIC_VERSION = "2023-06-01"
# Generation is slow: a long answer from a local model on a CPU can take minutes.
DEFAULT_LIMITS = dict(deadline_s=300.0, attempts=4, max_retry_after_s=120.0)


class Completion(BaseModel):
    text: str
    model: str
    input_tokens: int | None = None
    output_tokens: int | None = None


class Client:
    """POST one prompt as a single user message, return the model's text and usage."""

    path = ""

    def __init__(self, config: ProviderConfig, limits: NetLimits | None = None) -> None:
        self.config = config
        self.url = config.base_url + self.path
        self.limits = limits or NetLimits.from_env("RAG_EVAL", **DEFAULT_LIMITS)
        self._session: HttpSession | None = None

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def complete(self, prompt: str, sample: int = 0) -> Completion:
        """`sample` shifts the seed, so n samples of one prompt are n distinct requests."""
        if self._session is None:
            self._session = HttpSession(self.limits, headers=self.headers())
        try:
            reply = self._session.request(
                "POST", self.url, json=self.body(prompt, self.config.seed + sample)
            )
        except NetworkError as exc:
            raise GenerationError(
                f"{self.config.provider} is unreachable or failing: {exc.describe()}"
            ) from None
        if reply.status >= 300:
            raise GenerationError(self.explain(reply.status, reply.content))
        try:
            if self.config.stream:
                return self.parse_stream(reply.content)
            return self.parse(json.loads(reply.content))
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            problem = "malformed JSON" if isinstance(exc, ValueError) else "unexpected JSON"
            raise GenerationError(
                f"{self.config.provider} at {self.url} sent {problem} "
                f"({type(exc).__name__}); is this a {self.config.provider} endpoint?"
            ) from None

    def explain(self, status: int, body: bytes) -> str:
        """One line for a failed status, with the provider's message scrubbed of the key."""
        secret = self.config.api_key.get_secret_value() if self.config.api_key else ""
        text = provider_message(body)
        if secret:
            text = text.replace(secret, "[redacted]")
        line = f"{self.config.provider} at {self.url} answered HTTP {status}: {text}"
        if status == 404:
            return f"{line} (is model {self.config.model!r} available there?)"
        if status in (401, 403):
            return f"{line} (the key in {self.config.key_variable} was refused)"
        return line

    def headers(self) -> dict[str, str]:
        return {"content-type": "application/json"}

    def body(self, prompt: str, seed: int) -> dict:
        raise NotImplementedError

    def parse(self, data: dict) -> Completion:
        raise NotImplementedError

    def parse_stream(self, raw: bytes) -> Completion:
        raise NotImplementedError


def provider_message(body: bytes) -> str:
    """The provider's own error text (`error`, `error.message`, `message`), at most 200 chars."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict):
        err = data.get("error", data.get("message"))
        text = err.get("message", "") if isinstance(err, dict) else err
    else:
        text = body[:200].decode("utf-8", "replace")
    return str(text or "")[:200].strip()


def sse_events(raw: bytes) -> Iterator[tuple[str, str]]:
    """(event, data) pairs of a server-sent event stream; multi-line data joined by newlines."""
    event, data = "message", []
    for line in [*raw.decode("utf-8").splitlines(), ""]:
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


class OllamaClient(Client):
    path = "/api/chat"

    def body(self, prompt: str, seed: int) -> dict:
        c = self.config
        return dict(
            model=c.model,
            messages=[{"role": "user", "content": prompt}],
            stream=c.stream,
            options=dict(temperature=c.temperature, seed=seed, num_predict=c.max_tokens),
        )

    def parse(self, data: dict) -> Completion:
        if "error" in data:
            raise GenerationError(f"ollama at {self.url}: {str(data['error'])[:200]}")
        return Completion(
            text=data["message"]["content"],
            model=data.get("model", self.config.model),
            input_tokens=data.get("prompt_eval_count"),
            output_tokens=data.get("eval_count"),
        )

    def parse_stream(self, raw: bytes) -> Completion:
        parts, last = [], None
        for line in raw.decode("utf-8").splitlines():
            if line.strip():
                last = json.loads(line)
                if "error" in last:
                    self.parse(last)
                parts.append(last.get("message", {}).get("content", ""))
        if last is None or not last.get("done"):
            raise GenerationError(f"ollama at {self.url}: the stream ended before `done`")
        return self.parse({**last, "message": {"content": "".join(parts)}})


class AnthropicClient(Client):
    path = "/v1/messages"

    def headers(self) -> dict[str, str]:
        return {
            **super().headers(),
            "x-api-key": self.config.key(),
            "anthropic-version": ANTHROPIC_VERSION,
        }

    def body(self, prompt: str, seed: int) -> dict:
        c = self.config  # the Messages API takes no seed
        body = dict(
            model=c.model,
            max_tokens=c.max_tokens,
            temperature=c.temperature,
            messages=[{"role": "user", "content": prompt}],
        )
        return body | {"stream": True} if c.stream else body

    def parse(self, data: dict) -> Completion:
        usage = data.get("usage") or {}
        return Completion(
            text="".join(b["text"] for b in data["content"] if b.get("type") == "text"),
            model=data.get("model", self.config.model),
            input_tokens=usage.get("input_tokens"),
            output_tokens=usage.get("output_tokens"),
        )

    def parse_stream(self, raw: bytes) -> Completion:
        message: dict = {}
        parts: list[str] = []
        for event, payload in sse_events(raw):
            data = json.loads(payload)
            kind = data.get("type", event)
            if kind == "error":
                err = data.get("error", {}).get("message", "")
                raise GenerationError(f"anthropic at {self.url} stream error: {err[:200]}")
            if kind == "message_start":
                message = data["message"]
            elif kind == "content_block_delta" and data["delta"].get("type") == "text_delta":
                parts.append(data["delta"]["text"])
            elif kind == "message_delta":
                message.setdefault("usage", {}).update(data.get("usage") or {})
        if not message:
            raise GenerationError(f"anthropic at {self.url}: no message_start in the stream")
        return self.parse({**message, "content": [{"type": "text", "text": "".join(parts)}]})


class OpenAIClient(Client):
    path = "/chat/completions"

    def headers(self) -> dict[str, str]:
        # Local servers (vLLM, llama.cpp, LM Studio) need no key; send one only when set.
        if self.config.api_key is None:
            return super().headers()
        return {**super().headers(), "authorization": f"Bearer {self.config.key()}"}

    def body(self, prompt: str, seed: int) -> dict:
        c = self.config
        body = dict(
            model=c.model,
            messages=[{"role": "user", "content": prompt}],
            temperature=c.temperature,
            seed=seed,
            max_tokens=c.max_tokens,
            stream=c.stream,
        )
        return body | {"stream_options": {"include_usage": True}} if c.stream else body

    def parse(self, data: dict) -> Completion:
        usage = data.get("usage") or {}
        return Completion(
            text=data["choices"][0]["message"]["content"] or "",
            model=data.get("model", self.config.model),
            input_tokens=usage.get("prompt_tokens"),
            output_tokens=usage.get("completion_tokens"),
        )

    def parse_stream(self, raw: bytes) -> Completion:
        parts, model, usage, done = [], self.config.model, {}, False
        for _, payload in sse_events(raw):
            if payload.strip() == "[DONE]":
                done = True
                break
            data = json.loads(payload)
            if "error" in data:
                raise GenerationError(f"openai at {self.url} stream error: {str(data)[:200]}")
            model = data.get("model", model)
            usage = data.get("usage") or usage
            for choice in data.get("choices", []):
                parts.append(choice.get("delta", {}).get("content") or "")
        if not done:
            raise GenerationError(f"openai at {self.url}: the stream ended before [DONE]")
        message = {"message": {"content": "".join(parts)}}
        return self.parse({"model": model, "usage": usage, "choices": [message]})


CLIENTS: dict[str, type[Client]] = {
    "ollama": OllamaClient,
    "anthropic": AnthropicClient,
    "openai": OpenAIClient,
}


def client_for(config: ProviderConfig, limits: NetLimits | None = None) -> Client:
    return CLIENTS[config.provider](config, limits)

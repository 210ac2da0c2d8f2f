"""Three provider clients, each speaking its own wire format, streamed or not.

- Ollama `POST /api/chat`: one JSON object, or NDJSON lines when streaming (complete at the
  line with `done: true`).
- Anthropic Messages `POST /v1/messages` (`x-api-key`, `anthropic-version`): one JSON object,
  or server-sent events (`message_start`, `content_block_delta`, ..., `message_stop`).
- OpenAI-compatible `POST {base}/chat/completions` (vLLM, llama.cpp server, LM Studio, hosted):
  one JSON object, or SSE `data:` chunks, one with a `finish_reason`, ending in `data: [DONE]`.

Every request asks for the configured temperature (0 by default) and, where the API accepts
one, a fixed seed (Ollama, OpenAI; Anthropic has none). Token usage is kept when reported.
A verdict or grade is asked for as structured output (`verdicts.Structured`): OpenAI
`response_format`, Ollama `format`, an Anthropic tool forced by `tool_choice` (its input, as
JSON, is the completion's text). A stream that ends before its end marker is cut, not
complete: it is asked again, up to the attempts of the limits. Transport (deadline, size cap,
retries honouring `retry-after`) is `core.io.net`'s, with limits from `RAGEVAL_*` variables
(`RAGEVAL_LLM_DEADLINE_S`, `RAGEVAL_LLM_ATTEMPTS`, ...; see `NetLimits`). Error text never holds the
key: the provider's own message is scrubbed of it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

from pydantic import BaseModel

from rageval_pipeline.core.errors import NetworkError
from rageval_pipeline.core.generation.config import GenerationError, ProviderConfig
from rageval_pipeline.core.generation.verdicts import Structured
from rageval_pipeline.core.io.net import HttpSession, NetLimits, Reply
from rageval_pipeline.core.settings.limits import LLM, LLM_DEFAULTS

ANTHROPIC_VERSION = "2023-06-01"
# Anthropic's error events that may end a stream mid-way, the same conditions as HTTP 529/500.
TRANSIENT_STREAM_ERRORS = frozenset({"overloaded_error", "api_error"})


class IncompleteStream(GenerationError):
    """A streamed answer that ended before its end marker; the message says what is missing."""


class Completion(BaseModel):
    text: str
    model: str
    input_tokens: int | None = None
    output_tokens: int | None = None


def fit_in_step(limits: NetLimits, config: ProviderConfig) -> NetLimits:
    """The limits with each attempt's deadline cut so that every attempt of one call, and the
    back-offs between them, fit inside the step's total deadline: a provider that drips bytes
    then ends within `RAGEVAL_STEP_DEADLINE_S` on the transport's own line (`failed after 4
    attempt(s): no complete response within the 135 s deadline`), never past it; a tenth of
    the step is kept for what surrounds the attempts. With the defaults (4 x 300 s, 1,800 s)
    nothing is cut."""
    backoffs = sum(limits.backoff_s * 2**n for n in range(limits.attempts - 1))
    room = 0.9 * (config.step_deadline_s - backoffs) / limits.attempts
    if limits.deadline_s <= room or room <= 0:
        return limits
    return limits.model_copy(update={"deadline_s": room})


class Client:
    """POST one prompt as a single user message, return the model's text and usage."""

    path = ""

    def __init__(self, config: ProviderConfig, limits: NetLimits | None = None) -> None:
        self.config = config
        self.url = config.base_url + self.path
        self.limits = limits or fit_in_step(NetLimits.from_env(LLM, **LLM_DEFAULTS), config)
        self._session: HttpSession | None = None
        self._aborted = False
        self._lock = threading.Lock()

    def abort(self) -> None:
        """End the calls in flight (closing their connections) and refuse any new one."""
        with self._lock:
            session, self._session, self._aborted = self._session, None, True
        if session is not None:
            session.close()

    def _open(self) -> HttpSession:
        with self._lock:
            if self._aborted:
                raise GenerationError(f"{self.config.provider} call cancelled")
            if self._session is None:
                self._session = HttpSession(self.limits, headers=self.headers())
            return self._session

    def complete(
        self, prompt: str, sample: int = 0, output: Structured | None = None
    ) -> Completion:
        """`sample` shifts the seed, so n samples of one prompt are n distinct requests;
        `output` asks for that JSON object (unless `structured` is off)."""
        structured = output if self.config.structured != "off" else None
        body = self.body(prompt, self.config.seed + sample, structured)
        for attempt in range(1, self.limits.attempts + 1):
            try:
                return self._call(body)
            except IncompleteStream as exc:
                cut = exc
            if attempt < self.limits.attempts:
                time.sleep(self.limits.backoff_s * 2 ** (attempt - 1))
        raise GenerationError(
            f"{self.config.provider} at {self.url}: the stream was cut ({cut}) "
            f"in each of {self.limits.attempts} attempt(s)"
        )

    def _call(self, body: dict) -> Completion:
        try:
            reply = self._open().request("POST", self.url, json=body)
        except NetworkError as exc:
            raise GenerationError(
                f"{self.config.provider} is unreachable or failing: {exc.describe()}"
            ) from None
        if reply.status >= 300:
            raise GenerationError(self.explain(reply))
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

    def explain(self, reply: Reply) -> str:
        """One line for a failed status, with the provider's message scrubbed of the key."""
        secret = self.config.api_key.get_secret_value() if self.config.api_key else ""
        text = provider_message(reply.content)
        if secret:
            text = text.replace(secret, "[redacted]")
        status = reply.status
        line = f"{self.config.provider} at {self.url} answered HTTP {status}: {text}"
        elsewhere = [url for url in reply.redirects if _origin(url) != _origin(self.url)]
        if status in (401, 403) and elsewhere:  # core.io.net drops credentials across origins
            return (
                f"{self.config.provider} at {self.url} was redirected to {elsewhere[-1]}, which "
                f"answered HTTP {status}: {text} (credentials are not forwarded to another "
                "origin, so no key was sent there; set the base URL to the provider's address)"
            )
        if status == 404:
            return f"{line} (is model {self.config.model!r} available there?)"
        if status in (401, 403):
            return f"{line} (the key in {self.config.key_variable} was refused)"
        return line

    def headers(self) -> dict[str, str]:
        return {"content-type": "application/json"}

    def ask(self, prompt: str, output: Structured | None) -> str:
        """The prompt, with the JSON instruction where the provider is asked for JSON."""
        return f"{prompt}\n\n{output.instruction}" if output else prompt

    def body(self, prompt: str, seed: int, output: Structured | None) -> dict:
        raise NotImplementedError

    def parse(self, data: dict) -> Completion:
        raise NotImplementedError

    def parse_stream(self, raw: bytes) -> Completion:
        raise NotImplementedError


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port


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
    """(event, data) pairs of a server-sent event stream; multi-line data joined by newlines.
    An event is dispatched at the blank line that ends it: one cut short is dropped (the
    SSE specification's rule), so a cut stream misses its end marker."""
    event, data = "message", []
    for line in raw.decode("utf-8").splitlines():
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

    def body(self, prompt: str, seed: int, output: Structured | None) -> dict:
        c = self.config
        body = dict(
            model=c.model,
            messages=[{"role": "user", "content": self.ask(prompt, output)}],
            stream=c.stream,
            options=dict(temperature=c.temperature, seed=seed, num_predict=c.max_tokens),
        )
        if output is None:
            return body
        return body | {"format": output.schema() if c.structured == "schema" else "json"}

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
        text = raw.decode("utf-8")
        lines = [line for line in text.split("\n") if line.strip()]
        if lines and not text.endswith("\n"):
            try:  # the last line, unterminated: whole, or cut inside its JSON
                json.loads(lines[-1])
            except ValueError:
                raise IncompleteStream("its last line ends inside a JSON object") from None
        parts, last = [], None
        for line in lines:
            last = json.loads(line)
            if "error" in last:
                self.parse(last)
            parts.append(last.get("message", {}).get("content", ""))
        if last is None or last.get("done") is not True:
            raise IncompleteStream("no line with done: true")
        return self.parse({**last, "message": {"content": "".join(parts)}})


class AnthropicClient(Client):
    path = "/v1/messages"

    def headers(self) -> dict[str, str]:
        return {
            **super().headers(),
            "x-api-key": self.config.key(),
            "anthropic-version": ANTHROPIC_VERSION,
        }

    def body(self, prompt: str, seed: int, output: Structured | None) -> dict:
        c = self.config  # the Messages API takes no seed
        body = dict(
            model=c.model,
            max_tokens=c.max_tokens,
            temperature=c.temperature,
            messages=[{"role": "user", "content": prompt}],
        )
        if output is not None:  # a tool the model must call; its input is the verdict
            tool = dict(
                name=output.name,
                description=f"Record the {output.field}.",
                input_schema=output.schema(),
            )
            body |= dict(tools=[tool], tool_choice={"type": "tool", "name": output.name})
        return body | {"stream": True} if c.stream else body

    def parse(self, data: dict) -> Completion:
        usage = data.get("usage") or {}
        blocks = data["content"]
        tool = next((b for b in blocks if b.get("type") == "tool_use"), None)
        return Completion(
            text=json.dumps(tool["input"], ensure_ascii=False)
            if tool is not None
            else "".join(b["text"] for b in blocks if b.get("type") == "text"),
            model=data.get("model", self.config.model),
            input_tokens=usage.get("input_tokens"),
            output_tokens=usage.get("output_tokens"),
        )

    def parse_stream(self, raw: bytes) -> Completion:
        message: dict = {}
        blocks: dict[int, dict] = {}  # index -> the block, its text or JSON input in parts
        stopped = False
        for event, payload in sse_events(raw):
            data = json.loads(payload)
            kind = data.get("type", event)
            if kind == "error":
                err = data.get("error", {})
                text = f"{err.get('type', 'error')}: {str(err.get('message', ''))[:200]}"
                if err.get("type") in TRANSIENT_STREAM_ERRORS:  # as an HTTP 529 or 500 would be
                    raise IncompleteStream(f"an error event, {text}")
                raise GenerationError(f"anthropic at {self.url} stream error: {text}")
            if kind == "message_start":
                message = data["message"]
            elif kind == "content_block_start":
                blocks[data["index"]] = {"type": data["content_block"]["type"], "parts": []}
            elif kind == "content_block_delta":
                delta = data["delta"]
                part = delta.get("text") if delta["type"] == "text_delta" else None
                if delta["type"] == "input_json_delta":
                    part = delta["partial_json"]
                blocks[data["index"]]["parts"].append(part or "")
            elif kind == "message_delta":
                message.setdefault("usage", {}).update(data.get("usage") or {})
            elif kind == "message_stop":
                stopped = True
        if not stopped:
            raise IncompleteStream("no message_stop")
        content = [
            {"type": "tool_use", "input": json.loads("".join(b["parts"]) or "{}")}
            if b["type"] == "tool_use"
            else {"type": b["type"], "text": "".join(b["parts"])}
            for _, b in sorted(blocks.items())
        ]
        return self.parse({**message, "content": content})


class OpenAIClient(Client):
    path = "/chat/completions"

    def headers(self) -> dict[str, str]:
        # Local servers (vLLM, llama.cpp, LM Studio) need no key; send one only when set.
        if self.config.api_key is None:
            return super().headers()
        return {**super().headers(), "authorization": f"Bearer {self.config.key()}"}

    def body(self, prompt: str, seed: int, output: Structured | None) -> dict:
        c = self.config
        body = dict(
            model=c.model,
            messages=[{"role": "user", "content": self.ask(prompt, output)}],
            temperature=c.temperature,
            seed=seed,
            max_tokens=c.max_tokens,
            stream=c.stream,
        )
        if output is not None:
            schema = dict(name=output.name, strict=True, schema=output.schema())
            body["response_format"] = (
                {"type": "json_schema", "json_schema": schema}
                if c.structured == "schema"
                else {"type": "json_object"}
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
        parts, model, usage, finish, done = [], self.config.model, {}, None, False
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
                finish = choice.get("finish_reason") or finish
        if not done:
            raise IncompleteStream("no data: [DONE]")
        if finish is None:
            raise IncompleteStream("no finish_reason")
        message = {"message": {"content": "".join(parts)}}
        return self.parse({"model": model, "usage": usage, "choices": [message]})


CLIENTS: dict[str, type[Client]] = {
    "ollama": OllamaClient,
    "anthropic": AnthropicClient,
    "openai": OpenAIClient,
}


def client_for(config: ProviderConfig, limits: NetLimits | None = None) -> Client:
    return CLIENTS[config.provider](config, limits)

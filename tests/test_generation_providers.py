"""Each provider client against a loopback server speaking that provider's wire format."""

from __future__ import annotations

import json
import time

import pytest
from pydantic import SecretStr

from rageval_pipeline.core.generation.config import GenerationError, ProviderConfig
from rageval_pipeline.core.generation.providers import client_for
from rageval_pipeline.core.net import NetLimits
from tests.llm_servers import FakeLLM, Scripted

PROVIDERS = ["ollama", "anthropic", "openai"]
KEY = "sk-test-0123456789"
FAST = NetLimits(deadline_s=2.0, attempts=3, backoff_s=0.05)


@pytest.fixture(params=PROVIDERS)
def server(request):
    fake = FakeLLM(request.param).start()
    yield fake
    fake.stop()


def make_client(fake: FakeLLM, limits: NetLimits = FAST, **overrides):
    base = fake.url + ("/v1" if fake.provider == "openai" else "")
    config = ProviderConfig(
        provider=fake.provider,
        base_url=base,
        model="m-1",
        api_key=SecretStr(KEY),
        key_variable=f"RAG_EVAL_{fake.provider.upper()}_API_KEY",
        **overrides,
    )
    return client_for(config, limits)


@pytest.mark.parametrize("stream", [False, True])
def test_answer_text_usage_and_request_shape(server, stream):
    completion = make_client(server, stream=stream).complete("Question: why is the sky blue")
    assert completion.text == "The answer, from the context: Question: why is the sky blue"
    assert completion.model == "m-1"
    assert completion.input_tokens == 6 and completion.output_tokens == 11
    (request,) = server.requests
    body = request["body"]
    assert body["messages"] == [{"role": "user", "content": "Question: why is the sky blue"}]
    assert body.get("stream", False) is stream
    if server.provider == "ollama":
        assert request["path"] == "/api/chat"
        assert body["options"] == {"temperature": 0.0, "seed": 42, "num_predict": 512}
    elif server.provider == "anthropic":
        assert request["path"] == "/v1/messages"
        assert request["headers"]["x-api-key"] == KEY
        assert request["headers"]["anthropic-version"] == "2023-06-01"
        assert body["temperature"] == 0.0 and body["max_tokens"] == 512 and "seed" not in body
    else:
        assert request["path"] == "/v1/chat/completions"
        assert request["headers"]["authorization"] == f"Bearer {KEY}"
        assert body["temperature"] == 0.0 and body["seed"] == 42
        assert body.get("stream_options") == ({"include_usage": True} if stream else None)


def test_sample_number_shifts_the_seed(server):
    make_client(server).complete("q", sample=2)
    body = server.requests[0]["body"]
    seed = body.get("seed", body.get("options", {}).get("seed"))
    assert seed == (None if server.provider == "anthropic" else 44)


def test_transient_status_is_retried(server):
    server.script = [Scripted(503, b'{"error": "overloaded"}'), Scripted(500, b"oops")]
    assert make_client(server).complete("q").text.startswith("The answer")
    assert len(server.requests) == 3


def test_429_waits_for_retry_after(server):
    server.script = [Scripted(429, b'{"error": "slow down"}', {"retry-after": "1"})]
    started = time.monotonic()
    make_client(server).complete("q")
    assert time.monotonic() - started >= 0.95  # backoff alone would be 0.05 s
    assert len(server.requests) == 2


def test_429_for_ever_fails_naming_the_status(server):
    server.script = [Scripted(429, b"{}", {"retry-after": "0"})] * 3
    with pytest.raises(GenerationError, match="HTTP 429"):
        make_client(server).complete("q")
    assert len(server.requests) == 3


@pytest.mark.parametrize(
    ("status", "hint"), [(400, "bad request body"), (404, "is model 'm-1'"), (401, "was refused")]
)
def test_client_errors_fail_at_once_with_the_providers_message(server, status, hint):
    message = {"error": {"type": "x", "message": f"bad request body {KEY}"}}
    server.script = [Scripted(status, json.dumps(message).encode())]
    with pytest.raises(GenerationError, match=hint) as info:
        make_client(server).complete("q")
    assert f"HTTP {status}" in str(info.value)
    assert KEY not in str(info.value) and "[redacted]" in str(info.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
def test_malformed_json_is_a_clear_error(server, stream):
    broken = b'{"message": {"content": "unterminated'
    if stream and server.provider != "ollama":
        broken = b"data: " + broken + b"\n\n"  # an SSE event whose data is broken JSON
    server.script = [Scripted(200, broken)]
    with pytest.raises(GenerationError, match="malformed JSON"):
        make_client(server, stream=stream).complete("q")


def test_unexpected_json_is_a_clear_error(server):
    server.script = [Scripted(200, b'{"unrelated": true}')]
    with pytest.raises(GenerationError, match="unexpected JSON"):
        make_client(server).complete("q")


def test_slow_response_hits_the_deadline(server):
    server.script = [Scripted(200, b"{}", delay_s=1.5)]
    limits = NetLimits(deadline_s=0.3, attempts=1)
    started = time.monotonic()
    with pytest.raises(GenerationError, match="deadline"):
        make_client(server, limits).complete("q")
    assert time.monotonic() - started < 1.4


def test_truncated_stream_is_refused(server):
    truncated = {
        "ollama": b'{"message": {"content": "a"}, "done": false}\n',
        "anthropic": b'event: ping\ndata: {"type": "ping"}\n\n',
        "openai": b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n',
    }[server.provider]
    server.script = [Scripted(200, truncated)]
    with pytest.raises(GenerationError):
        make_client(server, stream=True).complete("q")


def test_unreachable_provider_names_it():
    fake = FakeLLM("ollama").start()
    fake.stop()  # nothing listens on that port any more
    with pytest.raises(GenerationError, match="ollama is unreachable"):
        make_client(fake, NetLimits(deadline_s=1, attempts=2, backoff_s=0.01)).complete("q")


@pytest.mark.parametrize("key", [None, "", f"{KEY}\n", "sk-clé-ünïcode", "sk a b"])
def test_missing_or_malformed_key_names_the_variable_never_the_value(key):
    fake = FakeLLM("anthropic").start()
    config = ProviderConfig(
        provider="anthropic",
        base_url=fake.url,
        model="m",
        api_key=None if key is None else SecretStr(key),
        key_variable="RAG_EVAL_ANTHROPIC_API_KEY",
    )
    try:
        with pytest.raises(GenerationError, match="RAG_EVAL_ANTHROPIC_API_KEY") as info:
            client_for(config, FAST).complete("q")
    finally:
        fake.stop()
    text = str(info.value)
    assert (key or "sk-") not in text or key in (None, "")
    assert info.value.__cause__ is None and fake.requests == []

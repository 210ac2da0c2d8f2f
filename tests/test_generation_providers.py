"""Each provider client against a loopback server speaking that provider's wire format."""

from __future__ import annotations

import json
import time

import pytest
from pydantic import SecretStr

from rageval_pipeline.core.generation.config import GenerationError, ProviderConfig
from rageval_pipeline.core.generation.providers import client_for
from rageval_pipeline.core.generation.verdicts import GRADE, VERDICT, parse_grade, parse_verdict
from rageval_pipeline.core.io.net import NetLimits
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
        key_variable=f"RAGEVAL_{fake.provider.upper()}_API_KEY",
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
    if stream:  # a whole NDJSON line or SSE event whose JSON is broken (not a cut stream)
        broken = broken + b"\n" if server.provider == "ollama" else b"data: " + broken + b"\n\n"
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


CUTS = {  # the end marker each provider's stream needs, and what is said when it is missing
    "ollama": "no line with done: true",
    "anthropic": "no message_stop",
    "openai": "no data: [DONE]",
}


def test_a_cut_stream_is_asked_again(server):
    server.cut_streams = 1  # the first answer ends cleanly, without its end marker
    completion = make_client(server, stream=True).complete("Question: why is the sky blue")
    assert completion.text == "The answer, from the context: Question: why is the sky blue"
    assert len(server.requests) == 2


def test_a_stream_cut_every_time_is_an_error_naming_the_missing_end(server):
    server.cut_streams = FAST.attempts
    client = make_client(server, stream=True)
    with pytest.raises(GenerationError) as info:
        client.complete("q")
    assert str(info.value) == (
        f"{server.provider} at {client.url}: the stream was cut ({CUTS[server.provider]}) "
        "in each of 3 attempt(s)"
    )
    assert len(server.requests) == 3


@pytest.mark.parametrize(
    ("provider", "raw", "missing"),
    [
        # OpenAI: [DONE] but no chunk with a finish_reason (the answer stopped mid-way).
        (
            "openai",
            b'data: {"choices": [{"delta": {"content": "a"}}]}\n\ndata: [DONE]\n\n',
            "no finish_reason",
        ),
        # SSE: an event cut before its blank line is not dispatched (the spec's rule).
        ("anthropic", b'event: message_stop\ndata: {"type": "message_stop"}\n', "no message_stop"),
        # NDJSON: the last line cut inside its JSON.
        (
            "ollama",
            b'{"message": {"content": "a"}, "done": false}\n{"message": {"con',
            "its last line ends inside a JSON object",
        ),
    ],
)
def test_partial_end_markers_are_cuts(provider, raw, missing):
    fake = FakeLLM(provider).start()
    fake.script = [Scripted(200, raw)] * FAST.attempts
    client = make_client(fake, stream=True)
    try:
        with pytest.raises(GenerationError) as info:
            client.complete("q")
    finally:
        fake.stop()
    expected = f"the stream was cut ({missing}) in each of 3 attempt(s)"
    assert str(info.value) == f"{provider} at {client.url}: {expected}"


def test_an_overloaded_event_mid_stream_is_asked_again():
    fake = FakeLLM("anthropic").start()
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    start = {"type": "message_start", "message": {"model": "m-1", "usage": {}}}
    events = [("message_start", start), ("error", overloaded)]
    raw = "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in events).encode()
    fake.script = [Scripted(200, raw)] * FAST.attempts
    client = make_client(fake, stream=True)
    try:
        with pytest.raises(GenerationError) as info:
            client.complete("q")
        assert len(fake.requests) == 3
        fake.script = [Scripted(200, raw)]
        assert client.complete("q").text.startswith("The answer")  # the second attempt
    finally:
        fake.stop()
    assert str(info.value) == (
        f"anthropic at {client.url}: the stream was cut (an error event, overloaded_error: "
        "Overloaded) in each of 3 attempt(s)"
    )


def test_a_connection_dropped_mid_stream_is_retried(server):
    server.cut_streams, server.drop_connection = 1, True
    completion = make_client(server, stream=True).complete("Question: why is the sky blue")
    assert completion.text.endswith("why is the sky blue")
    assert len(server.requests) == 2


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
        key_variable="RAGEVAL_ANTHROPIC_API_KEY",
    )
    try:
        with pytest.raises(GenerationError, match="RAGEVAL_ANTHROPIC_API_KEY") as info:
            client_for(config, FAST).complete("q")
    finally:
        fake.stop()
    text = str(info.value)
    assert (key or "sk-") not in text or key in (None, "")
    assert info.value.__cause__ is None and fake.requests == []


# --- structured verdicts and grades -------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": ["TRUE", "FALSE"]}},
    "required": ["verdict"],
    "additionalProperties": False,
}
ASK_JSON = 'Reply with a JSON object only: {"verdict": "TRUE"} or {"verdict": "FALSE"}.'


def expected_structure(provider: str, mode: str) -> dict:
    """What each provider's documented API takes to force the verdict object."""
    if provider == "anthropic":
        tool = {
            "name": "record_verdict",
            "description": "Record the verdict.",
            "input_schema": SCHEMA,
        }
        return {"tools": [tool], "tool_choice": {"type": "tool", "name": "record_verdict"}}
    if provider == "ollama":
        return {"format": SCHEMA if mode == "schema" else "json"}
    if mode == "schema":
        schema = {"name": "record_verdict", "strict": True, "schema": SCHEMA}
        return {"response_format": {"type": "json_schema", "json_schema": schema}}
    return {"response_format": {"type": "json_object"}}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("mode", ["schema", "json"])
def test_a_verdict_is_asked_for_as_structured_output(server, mode, stream):
    server.reply = lambda prompt: {"verdict": "FALSE"}
    client = make_client(server, structured=mode, stream=stream)
    completion = client.complete("Same facts?", output=VERDICT)
    assert json.loads(completion.text) == {"verdict": "FALSE"}
    assert parse_verdict(completion.text) == "FALSE"
    body = server.requests[0]["body"]
    for name, value in expected_structure(server.provider, mode).items():
        assert body[name] == value
    # Where the model is only told to answer JSON, the prompt says which object.
    prompt = body["messages"][0]["content"]
    assert prompt == (
        "Same facts?" if server.provider == "anthropic" else f"Same facts?\n\n{ASK_JSON}"
    )


def test_structured_off_asks_for_plain_text(server):
    server.reply = lambda prompt: {"verdict": "TRUE"}
    completion = make_client(server, structured="off").complete("Same facts?", output=VERDICT)
    assert completion.text == "TRUE"
    body = server.requests[0]["body"]
    assert not {"format", "response_format", "tools", "tool_choice"} & set(body)
    assert body["messages"][0]["content"] == "Same facts?"


def test_a_grade_is_asked_for_as_structured_output(server):
    server.reply = lambda prompt: {"grade": 2}
    completion = make_client(server).complete("Relevant?", output=GRADE)
    assert parse_grade(completion.text) == 2
    body = server.requests[0]["body"]
    schema = body.get("format") or body.get("response_format", {}).get("json_schema", {}).get(
        "schema"
    )
    if server.provider == "anthropic":
        schema = body["tools"][0]["input_schema"]
    assert schema["properties"] == {"grade": {"type": "integer", "enum": [0, 1, 2, 3]}}


# --- redirects ----------------------------------------------------------------------------


@pytest.mark.parametrize("status", [302, 307])
def test_401_after_a_redirect_to_another_origin_does_not_blame_the_key(server, status):
    other = FakeLLM(server.provider).start()  # another port: another origin
    refusal = {"type": "error", "error": {"type": "authentication_error", "message": "no key"}}
    other.script = [Scripted(401, json.dumps(refusal).encode())]
    server.script = [Scripted(status, b"", {"location": other.url + "/moved"})]
    # A 302 makes the POST a GET (no prompt sent); a 307 re-sends the prompt, which core.io.net
    # does across origins only when allowed (RAGEVAL_LLM_ALLOW_CROSS_ORIGIN_REDIRECTS).
    limits = FAST.model_copy(update={"allow_cross_origin_redirects": True})
    client = make_client(server, limits)
    try:
        with pytest.raises(GenerationError) as info:
            client.complete("q")
    finally:
        other.stop()
    assert str(info.value) == (
        f"{server.provider} at {client.url} was redirected to {other.url}/moved, which answered "
        "HTTP 401: no key (credentials are not forwarded to another origin, so no key was sent "
        "there; set the base URL to the provider's address)"
    )
    sent = {k.lower() for k in other.requests[0]["headers"]}
    assert not {"x-api-key", "authorization"} & sent  # indeed never sent


def test_401_after_a_same_origin_redirect_blames_the_key(server):
    refusal = {"error": {"message": "invalid key"}}
    server.script = [
        Scripted(307, b"", {"location": server.url + "/moved"}),
        Scripted(401, json.dumps(refusal).encode()),
    ]
    client = make_client(server)
    with pytest.raises(GenerationError) as info:
        client.complete("q")
    assert str(info.value) == (
        f"{server.provider} at {client.url} answered HTTP 401: invalid key "
        f"(the key in RAGEVAL_{server.provider.upper()}_API_KEY was refused)"
    )

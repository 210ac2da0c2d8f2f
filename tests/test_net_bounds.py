"""core/io/net.py's bounds that need more than one exchange to show: the size cap holding while a
body is decoded (memory measured in a child process), POSTs redirected to another origin
(two loopback servers, two origins), and every 5xx retried, through each kind of client."""

from __future__ import annotations

import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from pydantic import SecretStr

from rageval_pipeline.core.errors import NetworkError
from rageval_pipeline.core.generation.config import GenerationError, ProviderConfig
from rageval_pipeline.core.generation.providers import client_for
from rageval_pipeline.core.io import net
from rageval_pipeline.core.retrieval.external import HttpRetriever
from tests.llm_servers import FakeLLM, Scripted
from tests.loopback_http import reply, sequence
from tests.test_generation_providers import make_client

PREFIX = "RAGEVAL_TEST"
ROOT = Path(__file__).resolve().parents[1]


def limits(**values) -> net.NetLimits:
    return net.NetLimits.from_env(PREFIX, **({"backoff_s": 0.01, "attempts": 1} | values))


def bomb(mib: int, wbits: int) -> bytes:
    """`mib` MiB of zeros compressed (gzip: wbits 31, zlib-wrapped deflate 15, raw deflate
    -15) without holding them: about 1 kB per MiB."""
    squeeze, zeros = zlib.compressobj(9, zlib.DEFLATED, wbits), bytes(1 << 20)
    return b"".join(squeeze.compress(zeros) for _ in range(mib)) + squeeze.flush()


# Requests `url` in a fresh process (nothing else inflates its peak) and prints the error and
# the growth of its peak RSS over the request, in MiB.
CHILD = """
import resource, sys
from pathlib import Path
from pydantic import SecretStr

from rageval_pipeline.core.io import net
from rageval_pipeline.core.errors import NetworkError
from rageval_pipeline.core.generation.config import GenerationError, ProviderConfig
from rageval_pipeline.core.generation.providers import client_for
from rageval_pipeline.core.retrieval.external import HttpRetriever
from tests.llm_servers import FakeLLM, Scripted
from tests.loopback_http import reply, sequence
from tests.test_generation_providers import make_client
url, how, cap = sys.argv[1], sys.argv[2], int(sys.argv[3])
limits = net.NetLimits.from_env("RAGEVAL_TEST", attempts=1, max_response_bytes=cap)
session = net.HttpSession(limits)
session.request("GET", url.rsplit("/", 1)[0] + "/warm")  # httpx's first-use allocations
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    if how == "download":
        net.download(url, Path(sys.argv[4]) / "out", limits)
    elif how == "beir":  # the BEIR client: its own limits, RAGEVAL_BEIR_MAX_RESPONSE_BYTES set
        from rageval_pipeline.core.io import beir
        beir.fetch_archive("scifact", Path(sys.argv[4]), base=url.rsplit("/", 1)[0])
    else:
        session.request("GET", url)
    print("accepted")
except NetworkError as error:
    print(error)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


class TestDecodingBombs:
    """A 300 MiB body compressed to 300 kB is stopped at the cap while it is decoded: the
    process never holds more than the cap and a few pieces (httpx alone inflates each 64 kB
    read whole, 64 MiB at a time: 130 MiB of growth here)."""

    @pytest.mark.parametrize(
        ("encoding", "wbits", "how"),
        [
            ("gzip", 31, "request"),
            ("deflate", 15, "request"),
            ("deflate", -15, "request"),  # raw deflate, as some servers send it
            ("gzip", 31, "download"),  # into a file
            ("gzip", 31, "beir"),  # the BEIR download
            ("deflate, gzip", 15, "request"),  # a deflate bomb, then gzip over it
        ],
        ids=["gzip", "deflate-zlib", "deflate-raw", "gzip-download", "beir", "chained"],
    )
    def test_a_bomb_is_refused_within_bounded_memory(
        self, scripted, tmp_path, encoding, wbits, how
    ):
        body = bomb(300, wbits)
        if encoding == "deflate, gzip":  # listed in the order applied
            body = zlib.compress(body, wbits=31)
        assert len(body) < 400_000
        scripted.route("/warm", reply(200, b"ok"))
        path = "/scifact.zip" if how == "beir" else "/bomb"
        url = scripted.route(path, reply(200, body, {"Content-Encoding": encoding}))
        cap = 1 << 20
        child = subprocess.run(
            [sys.executable, "-c", CHILD, url, how, str(cap), str(tmp_path)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={
                "PYTHONPATH": str(ROOT),
                "PATH": "/usr/bin:/bin",
                "RAGEVAL_BEIR_MAX_RESPONSE_BYTES": str(cap),
            },
            timeout=120,
        )
        assert child.returncode == 0, child.stderr[-2000:]
        message, growth = child.stdout.splitlines()
        prefix = "RAGEVAL_BEIR" if how == "beir" else PREFIX
        assert message == (
            f"{url}: the response exceeds the {cap}-byte limit ({prefix}_MAX_RESPONSE_BYTES)"
        )
        assert int(growth) < 32, f"peak RSS grew by {growth} MiB for a {cap}-byte cap"

    @pytest.mark.parametrize("encoding", ["gzip", "deflate", "x-gzip", "GZIP", "identity, gzip"])
    def test_a_body_within_the_cap_decodes_whole(self, scripted, encoding):
        text = b"The quick brown fox. " * 10_000  # 210 kB: several 64 kB pieces
        wbits = 15 if encoding == "deflate" else 31
        squeeze = zlib.compressobj(6, zlib.DEFLATED, wbits)
        body = squeeze.compress(text) + squeeze.flush()
        url = scripted.route("/ok", reply(200, body, {"Content-Encoding": encoding}))
        with net.HttpSession(limits()) as session:
            got = session.request("GET", url)
        assert (got.content, got.size) == (text, len(text))
        assert scripted.hits("/ok")[0].headers["Accept-Encoding"] == "gzip, deflate"

    @pytest.mark.parametrize(
        ("encoding", "body", "problem"),
        [
            (
                "br",
                b"\x0b\x02\x80hello\x03",
                "the response's Content-Encoding 'br' is not supported",
            ),
            (
                "zstd",
                b"(\xb5/\xfd hello",
                "the response's Content-Encoding 'zstd' is not supported",
            ),
            ("gzip", zlib.compress(b"hello" * 100, wbits=31)[:-12], "the response body could not"),
        ],
        ids=["br", "zstd", "gzip-cut-short"],
    )
    def test_an_undecodable_body_is_refused_once(self, scripted, encoding, body, problem):
        url = scripted.route("/enc", reply(200, body, {"Content-Encoding": encoding}))
        with pytest.raises(NetworkError) as err, net.HttpSession(limits(attempts=3)) as session:
            session.request("GET", url)
        expected = {
            "br": f"{url}: {problem} (accepted: gzip, deflate)",
            "zstd": f"{url}: {problem} (accepted: gzip, deflate)",
            "gzip": f"{url}: {problem} be decoded (its Content-Encoding does not match)",
        }[encoding]
        assert str(err.value) == expected
        assert len(scripted.hits("/enc")) == 1


def post(url: str, **values) -> net.Reply:
    with net.HttpSession(limits(**values), {"Authorization": "Bearer k"}) as session:
        return session.request("POST", url, json={"prompt": "private text"})


class TestCrossOriginRedirects:
    """A redirect that would carry a request's body to another origin (another port here) is
    refused unless configured; same-origin ones, and those that drop the body, are followed."""

    @pytest.mark.parametrize("status", [307, 308])
    def test_a_post_sent_on_to_another_origin_is_refused(self, scripted, elsewhere, status):
        target = elsewhere.route("/api", reply(200, b"{}"))
        url = scripted.route("/api", reply(status, headers={"Location": target + "?k=1"}))
        with pytest.raises(NetworkError) as err:
            post(url + "?key=secret", attempts=3)
        assert str(err.value) == (
            f"{url}?…: HTTP {status} redirects this POST to another origin ({target}?…); not "
            f"followed, so the request body is not sent there (set "
            f"{PREFIX}_ALLOW_CROSS_ORIGIN_REDIRECTS to true to allow it)"
        )
        assert elsewhere.requests == [] and len(scripted.requests) == 1

    @pytest.mark.parametrize("status", [307, 308])
    def test_same_origin_redirects_keep_working(self, scripted, status):
        scripted.route("/old", reply(status, headers={"Location": "/new"}))
        scripted.route("/new", reply(200, b"{}"))
        assert post(scripted.url + "/old").status == 200
        new = scripted.hits("/new")[0]
        assert (new.method, new.body) == ("POST", b'{"prompt":"private text"}')

    def test_configuration_allows_it_without_the_credentials(
        self, scripted, elsewhere, monkeypatch
    ):
        monkeypatch.setenv(f"{PREFIX}_ALLOW_CROSS_ORIGIN_REDIRECTS", "true")
        target = elsewhere.route("/api", reply(200, b"{}"))
        url = scripted.route("/api", reply(307, headers={"Location": target}))
        assert post(url).status == 200
        (seen,) = elsewhere.requests
        assert (seen.method, seen.body) == ("POST", b'{"prompt":"private text"}')
        assert "Authorization" not in seen.headers

    @pytest.mark.parametrize("status", [301, 302, 303])
    def test_a_redirect_that_turns_the_post_into_a_get_is_followed(
        self, scripted, elsewhere, status
    ):
        target = elsewhere.route("/api", reply(200, b"{}"))
        url = scripted.route("/api", reply(status, headers={"Location": target}))
        assert post(url).status == 200
        (seen,) = elsewhere.requests
        assert (seen.method, seen.body) == ("GET", b"")

    @pytest.mark.parametrize("provider", ["ollama", "openai", "anthropic"])
    def test_llm_clients_never_send_the_prompt_on(self, scripted, provider):
        fake = FakeLLM(provider).start()
        try:
            path = {"ollama": "/api/chat", "openai": "/v1/chat/completions"}.get(
                provider, "/v1/messages"
            )
            scripted.route(path, reply(307, headers={"Location": fake.url + path}))
            config = ProviderConfig(
                provider=provider,
                base_url=scripted.url + ("/v1" if provider == "openai" else ""),
                model="m-1",
                api_key=SecretStr("sk-test"),
                key_variable=f"RAGEVAL_{provider.upper()}_API_KEY",
            )
            llm = client_for(config, net.NetLimits.from_env("RAGEVAL_LLM", attempts=2))
            with pytest.raises(GenerationError) as err:
                llm.complete("Question: what is in my private corpus?")
        finally:
            fake.stop()
        assert str(err.value).endswith(
            f"{scripted.url}{path}: HTTP 307 redirects this POST to another origin "
            f"({fake.url}{path}); not followed, so the request body is not sent there (set "
            "RAGEVAL_LLM_ALLOW_CROSS_ORIGIN_REDIRECTS to true to allow it)"
        )
        assert fake.requests == []

    def test_the_http_search_adapter_never_sends_the_query_on(self, scripted, elsewhere):
        target = elsewhere.route("/search", reply(200, b'{"results": []}'))
        url = scripted.route("/search", reply(308, headers={"Location": target}))
        retriever = HttpRetriever(url, attempts=2, backoff_s=0.01)
        try:
            with pytest.raises(NetworkError) as err:
                retriever.search("private question", 10)
        finally:
            retriever.close()
        assert str(err.value) == (
            f"{url}: HTTP 308 redirects this POST to another origin ({target}); not followed, "
            "so the request body is not sent there (set RAGEVAL_HTTP_ALLOW_CROSS_ORIGIN_REDIRECTS "
            "to true to allow it)"
        )
        assert elsewhere.requests == []


class TestEveryServerErrorIsRetried:
    @pytest.mark.parametrize("status", [500, 501, 505, 520, 529, 599])
    def test_a_5xx_then_200_succeeds(self, scripted, status):
        url = scripted.route("/busy", sequence(reply(status, b"overloaded"), reply(200, b"ok")))
        got = post(url, attempts=2)
        assert (got.status, got.content, got.attempts) == (200, b"ok", 2)
        assert len(scripted.hits("/busy")) == 2

    def test_anthropic_overloaded_529_is_retried(self):
        fake = FakeLLM("anthropic").start()
        overloaded = b'{"type": "error", "error": {"type": "overloaded_error", "message": "x"}}'
        fake.script = [Scripted(529, overloaded)]
        try:
            llm = make_client(fake, net.NetLimits(deadline_s=5.0, attempts=2, backoff_s=0.01))
            assert llm.complete("q").text.startswith("The answer")
        finally:
            fake.stop()
        assert len(fake.requests) == 2

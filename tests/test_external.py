"""The user's own system: HTTP endpoint (a real server on 127.0.0.1), Python entry point and
run files."""

import json
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.retrieval.base import Hit, execute
from rageval_pipeline.core.retrieval.external import (
    HttpRetriever,
    PythonRetriever,
    load_entry_point,
    read_run_file,
)
from tests.loopback_http import reply, trickle
from tests.loopback_http import sequence as in_turn
from tests.test_net import MALFORMED, SECRET, full_text

FIXTURES = Path(__file__).parent / "fixtures" / "retrieval"
TOKEN = "s3cr3t-token-value"
QUERIES = pd.DataFrame({"query_id": ["q1", "q2", "q3"], "text": ["alpha", "beta", "gamma"]})

# A reply: (status, body bytes, seconds to wait before answering).
Reply = tuple[int, bytes, float]


def ok(results: list[dict]) -> Reply:
    return 200, json.dumps({"results": results}).encode(), 0.0


class Endpoint:
    """A search endpoint on 127.0.0.1; `answer(request body) -> Reply`, requests recorded."""

    def __init__(self, answer: Callable[[dict], Reply]) -> None:
        self.answer = answer
        self.requests: list[tuple[dict, dict]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.requests.append((body, dict(self.headers)))
                status, payload, delay = endpoint.answer(body)
                time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/search"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[dict], Reply]], Endpoint]]:
    started: list[Endpoint] = []

    def start(answer: Callable[[dict], Reply]) -> Endpoint:
        started.append(Endpoint(answer))
        return started[-1]

    yield start
    for endpoint in started:
        endpoint.close()


def retriever(url: str, **kwargs) -> HttpRetriever:
    kwargs.setdefault("backoff_s", 0.01)
    return HttpRetriever(url, **kwargs)


def echo(body: dict) -> Reply:
    n = body["top_k"]
    return ok(
        [{"id": f"{body['query']}-{i}", "score": float(i), "source_id": "s"} for i in range(n)]
    )


def sequence(*replies: Reply) -> Callable[[dict], Reply]:
    """Answer with each reply in turn, then the last one forever."""
    queue = list(replies)
    return lambda body: queue.pop(0) if len(queue) > 1 else queue[0]


# --- HTTP ------------------------------------------------------------------------------


def test_http_run_follows_the_contract(serve):
    endpoint = serve(echo)
    http = retriever(endpoint.url, headers={"Authorization": TOKEN})
    run = execute(http.search, QUERIES, 3, concurrency=3)
    http.close()
    assert sorted(body["query"] for body, _ in endpoint.requests) == ["alpha", "beta", "gamma"]
    assert all(body == {"query": body["query"], "top_k": 3} for body, _ in endpoint.requests)
    assert {headers["Authorization"] for _, headers in endpoint.requests} == {TOKEN}
    q1 = run[run["query_id"] == "q1"]
    assert q1["doc_id"].tolist() == ["alpha-2", "alpha-1", "alpha-0"]
    assert q1["rank"].tolist() == [1, 2, 3] and set(q1["source_id"]) == {"s"}
    assert (run["latency_ms"] > 0).all()


@pytest.mark.parametrize("status", [500, 503, 429])
def test_http_transient_status_is_retried(serve, status):
    endpoint = serve(
        sequence((status, b"busy", 0), (status, b"busy", 0), ok([{"id": "d", "score": 1}]))
    )
    assert retriever(endpoint.url).search("q", 5) == [Hit("d", 1.0, None)]
    assert len(endpoint.requests) == 3


def test_http_gives_up_after_max_attempts(serve):
    endpoint = serve(lambda body: (502, b"", 0))
    with pytest.raises(InputError, match=r"failed after 3 attempt\(s\): HTTP 502") as err:
        retriever(endpoint.url).search("q", 5)
    assert err.value.path == endpoint.url
    assert len(endpoint.requests) == 3


@pytest.mark.parametrize("status", [400, 401, 404])
def test_http_client_errors_are_not_retried_and_never_show_the_token(serve, status):
    endpoint = serve(lambda body: (status, json.dumps({"echo": TOKEN}).encode(), 0))
    with pytest.raises(InputError, match=f"HTTP {status}") as err:
        execute(retriever(endpoint.url, headers={"X-Api-Key": TOKEN}).search, QUERIES[:1], 5)
    assert len(endpoint.requests) == 1
    assert TOKEN not in str(err.value) and TOKEN not in repr(err.value.__cause__)


def test_http_timeout_is_retried(serve):
    endpoint = serve(sequence((200, b'{"results": []}', 3.0), ok([{"id": "d", "score": 0.5}])))
    # 1 s is ample for a loopback answer on a loaded machine, and far below the 3 s stall.
    assert retriever(endpoint.url, timeout_s=1.0).search("q", 5) == [Hit("d", 0.5, None)]
    assert len(endpoint.requests) == 2


def test_http_connection_refused_is_retried_then_reported():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again at once: nothing listens there
    url = f"http://127.0.0.1:{port}/search"
    with pytest.raises(InputError, match=r"failed after 2 attempt\(s\): connection failed"):
        retriever(url, attempts=2).search("q", 5)


@pytest.mark.parametrize(
    ("payload", "field", "problem"),
    [
        (b"<html>oops</html>", None, "not valid JSON"),
        (b'{"hits": []}', "results", "Field required"),
        (b'{"results": [{"id": "a", "score": 1}, {"id": "b"}]}', "results[1].score", "required"),
        (b'{"results": [{"id": 7, "score": 1}]}', "results[0].id", "string"),
        (b'{"results": [{"id": "a", "score": "0.5"}]}', "results[0].score", "number"),
        (b'{"results": [{"id": "a", "score": 1, "metadata": []}]}', "results[0].metadata", ""),
        (b'{"results": [{"id": "a", "score": 1}, {"id": "a", "score": 0}]}', "results[1].id", ""),
    ],
)
def test_http_malformed_response_names_url_query_and_field_and_is_not_retried(
    serve, payload, field, problem
):
    endpoint = serve(lambda body: (200, payload, 0) if body["query"] == "beta" else ok([]))
    with pytest.raises(InputError) as err:
        execute(retriever(endpoint.url).search, QUERIES, 5)
    assert err.value.path == endpoint.url
    assert err.value.field == "query q2" + (f": {field}" if field else "")
    assert problem in err.value.problem
    assert str(err.value).startswith(f"{endpoint.url}: query q2")
    assert sum(body["query"] == "beta" for body, _ in endpoint.requests) == 1


def test_http_extra_result_fields_are_accepted(serve):
    endpoint = serve(lambda body: ok([{"id": "a", "score": 2, "content": "c", "rerank": True}]))
    assert retriever(endpoint.url).search("q", 1) == [Hit("a", 2.0, None)]


def test_blank_query_returns_nothing_without_calling(serve):
    endpoint = serve(echo)
    queries = pd.DataFrame({"query_id": ["e1", "e2"], "text": ["", "  "]})
    run = execute(retriever(endpoint.url).search, queries, 5)
    assert endpoint.requests == []
    assert run["doc_id"].isna().all() and run["query_id"].tolist() == ["e1", "e2"]


@pytest.mark.parametrize("k", [0, 101])
def test_top_k_outside_1_to_100_is_refused(serve, k):
    endpoint = serve(echo)
    with pytest.raises(InputError, match="top_k must be between 1 and 100") as err:
        retriever(endpoint.url).search("q", k)
    assert err.value.field == "top_k" and endpoint.requests == []


# --- Python entry point ----------------------------------------------------------------


@pytest.fixture
def my_search():
    sys.path.insert(0, str(FIXTURES))
    import my_search

    yield my_search
    sys.path.remove(str(FIXTURES))
    my_search.calls.clear()


def python(function: str, **kwargs) -> PythonRetriever:
    kwargs.setdefault("backoff_s", 0.01)
    return PythonRetriever(f"my_search:{function}", search_path=FIXTURES, **kwargs)


def test_entry_point_results_in_every_accepted_shape(my_search):
    assert python("pairs").search("q", 5) == [Hit("doc-a", 0.5, None), Hit("doc-b", 2.0, None)]
    assert my_search.calls == [("q", 5)]
    assert python("dicts").search("q", 5) == [Hit("doc-a", 0.1, "a")]
    run = execute(python("hits").search, QUERIES[:1], 5)
    assert run["doc_id"].tolist() == ["doc-b:chunk:0", "doc-a:chunk:1"]  # tie: id desc
    assert run["source_id"].tolist() == ["doc-b", "doc-a"]


@pytest.mark.parametrize(
    ("function", "field", "problem"),
    [
        ("not_a_list", "result", "returned str"),
        ("bad_item", "result[1]", "got int"),
        ("bad_score", "result[1].score", "number"),
    ],
)
def test_entry_point_invalid_results_name_the_field(my_search, function, field, problem):
    with pytest.raises(InputError, match=problem) as err:
        execute(python(function).search, QUERIES[1:2], 5)
    assert err.value.path == f"my_search:{function}"
    assert err.value.field == f"query q2: {field}"


def test_entry_point_exception_is_reported_once(my_search):
    with pytest.raises(InputError, match="raised ValueError: index not loaded"):
        python("broken").search("q", 5)


def test_entry_point_transient_errors_are_retried(my_search):
    my_search.set_flaky(2)
    assert python("flaky").search("q", 5) == [Hit("doc-a", 1.0, None)]
    my_search.set_flaky(3)
    with pytest.raises(InputError, match=r"after 3 attempt.*ConnectionError"):
        python("flaky").search("q", 5)


def test_entry_point_timeout(my_search):
    with pytest.raises(InputError, match=r"after 1 attempt\(s\): timed out after 0.2 s"):
        python("slow", timeout_s=0.2, attempts=1).search("q", 5)


def test_entry_point_blank_query_and_top_k(my_search):
    assert python("pairs").search("", 5) == []
    assert my_search.calls == []
    with pytest.raises(InputError, match="top_k"):
        python("pairs").search("q", 101)


@pytest.mark.parametrize(
    ("entry_point", "problem"),
    [
        ("my_search.pairs", "expected 'module:function'"),
        ("no_such_module_xyz:f", "cannot import 'no_such_module_xyz'"),
        ("my_search:nope", "has no function 'nope'"),
        ("my_search:calls", "has no function 'calls'"),
    ],
)
def test_bad_entry_points(my_search, entry_point, problem):
    with pytest.raises(InputError, match=problem):
        load_entry_point(entry_point, FIXTURES)


# --- run files -------------------------------------------------------------------------


def test_trec_run_file_is_reordered_the_trec_eval_way():
    run = read_run_file(FIXTURES / "run.trec")
    assert run[["query_id", "doc_id", "source_id", "rank", "score"]].values.tolist() == [
        ["q1", "d2", "d2", 1, 0.9],
        ["q1", "d0", "d0", 2, 0.9],
        ["q1", "d1:chunk:2", "d1", 3, 0.5],
        ["q2", "d3", "d3", 1, -1.5],
    ]
    assert run["latency_ms"].isna().all()


def test_parquet_run_file_round_trip(tmp_path):
    trec = read_run_file(FIXTURES / "run.trec")
    trec.assign(latency_ms=3.0).to_parquet(tmp_path / "ours.parquet")
    back = read_run_file(tmp_path / "ours.parquet")
    pd.testing.assert_frame_equal(back, trec.assign(latency_ms=3.0))
    (tmp_path / "ours.bin").write_bytes((tmp_path / "ours.parquet").read_bytes())
    pd.testing.assert_frame_equal(read_run_file(tmp_path / "ours.bin", "parquet"), back)


def test_declared_format_must_match_the_file(tmp_path):
    with pytest.raises(InputError, match="declared parquet but the file is trec") as err:
        read_run_file(FIXTURES / "run.trec", "parquet")
    assert err.value.field == "format"
    read_run_file(FIXTURES / "run.trec").to_parquet(tmp_path / "ours.parquet")
    with pytest.raises(InputError, match="declared trec but the file is parquet"):
        read_run_file(tmp_path / "ours.parquet", "trec")


def test_bad_run_files_are_input_errors(tmp_path):
    # Parsing is core/io/formats.py's (tested there); here: its errors reach the caller as is.
    (tmp_path / "bad.trec").write_text("q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 high t\n")
    with pytest.raises(InputError) as err:
        read_run_file(tmp_path / "bad.trec")
    assert (err.value.line, err.value.field) == (2, "score")
    with pytest.raises(InputError):
        read_run_file(tmp_path / "missing.trec", "trec")


# --- limits and secrets through core.io.net ---------------------------------------------------

RESULTS = json.dumps({"results": [{"id": "d", "score": 1.0}]}).encode()


class TestHttpLimits:
    @pytest.mark.parametrize("phase", ["stall", "headers", "body"])
    def test_a_trickling_endpoint_stops_at_the_total_deadline(self, scripted, phase):
        url = scripted.route("/search", trickle(phase, interval_s=0.05))
        with pytest.raises(InputError) as err:
            execute(retriever(url, timeout_s=0.5, attempts=1).search, QUERIES[:1], 5)
        assert str(err.value) == (
            f"{url}: query q1: failed after 1 attempt(s): no complete response within the "
            "0.5 s deadline (RAGEVAL_HTTP_DEADLINE_S)"
        )

    @pytest.mark.parametrize(("size", "cap"), [(2000, 1000), (1001, 1000), (100_000, 50_000)])
    def test_an_oversized_response_is_refused(self, scripted, monkeypatch, size, cap):
        monkeypatch.setenv("RAGEVAL_HTTP_MAX_RESPONSE_BYTES", str(cap))
        padding = "x" * size
        body = json.dumps({"results": [{"id": "d", "score": 1, "content": padding}]}).encode()
        url = scripted.route("/search", reply(200, body))
        with pytest.raises(InputError) as err:
            retriever(url).search("q", 5)
        assert str(err.value) == (
            f"{url}: the response exceeds the {cap}-byte limit (RAGEVAL_HTTP_MAX_RESPONSE_BYTES)"
        )
        assert len(scripted.requests) == 1

    @pytest.mark.parametrize("status", [429, 503])
    def test_retry_after_is_honoured(self, scripted, status):
        url = scripted.route(
            "/search",
            in_turn(reply(status, headers={"Retry-After": "1"}), reply(200, RESULTS)),
        )
        assert retriever(url).search("q", 5) == [Hit("d", 1.0, None)]
        first, second = scripted.requests
        assert 0.95 <= second.at - first.at < 4.0

    @pytest.mark.parametrize("hops", [1, 2])
    def test_redirect_loop_names_the_url(self, scripted, hops):
        for i in range(hops):
            scripted.route(f"/r{i}", reply(307, headers={"Location": f"/r{(i + 1) % hops}"}))
        with pytest.raises(InputError) as err:
            retriever(scripted.url + "/r0").search("q", 5)
        assert str(err.value).startswith(f"{scripted.url}/r0: more than 5 redirect(s)")


class TestHttpSecrets:
    @pytest.mark.parametrize(("value", "problem"), MALFORMED)
    def test_a_malformed_token_is_refused_before_any_request(
        self, scripted, monkeypatch, value, problem
    ):
        monkeypatch.setenv("SEARCH_API_TOKEN", value)
        url = scripted.route("/search", reply(200, RESULTS))
        with pytest.raises(InputError) as err:
            retriever(url, headers_from_env={"Authorization": "SEARCH_API_TOKEN"})
        assert str(err.value) == (
            f"{url}: headers_from_env.Authorization: environment variable SEARCH_API_TOKEN is "
            f"not a valid Authorization header value: {problem} (the value is not shown)"
        )
        assert SECRET not in full_text(err.value) and scripted.requests == []

    @pytest.mark.parametrize("status", [401, 403, 400])
    def test_a_rejected_token_echoed_in_the_body_never_shows(self, scripted, monkeypatch, status):
        monkeypatch.setenv("SEARCH_API_TOKEN", "Bearer " + SECRET)
        url = scripted.route("/search", lambda h: reply(status, str(h.headers).encode())(h))
        http = retriever(url, headers_from_env={"Authorization": "SEARCH_API_TOKEN"})
        with pytest.raises(InputError) as err:
            execute(http.search, QUERIES[:1], 5)
        assert str(err.value) == (
            f"{url}: query q1: HTTP {status} {HTTPStatus(status).phrase} (not retried)"
        )
        assert scripted.requests[0].headers["Authorization"] == "Bearer " + SECRET
        assert SECRET not in full_text(err.value)

    @pytest.mark.parametrize("query", ["api_key=" + SECRET, "a=1&token=" + SECRET])
    def test_a_secret_in_the_query_string_never_shows(self, scripted, query):
        url = scripted.route("/search", reply(500))
        with pytest.raises(InputError) as err:
            retriever(f"{url}?{query}", attempts=1).search("q", 5)
        assert str(err.value) == f"{url}?…: failed after 1 attempt(s): HTTP 500"
        assert SECRET not in full_text(err.value)

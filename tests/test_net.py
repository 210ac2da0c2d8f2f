"""core/io/net.py against real loopback servers: deadlines, size caps, redirects, decoding,
retries and header secrets. Each class of problem is shown over several instances."""

from __future__ import annotations

import email.utils
import time
import traceback
import zlib

import pytest

from rageval_pipeline.core.errors import InputError, NetworkError
from rageval_pipeline.core.io import net
from tests.loopback_http import gzip_bomb, reply, sequence, trickle

PREFIX = "RAGEVAL_TEST"
SECRET = "s3cr3t-TOKEN-value"


def limits(**values) -> net.NetLimits:
    return net.NetLimits.from_env(PREFIX, **({"backoff_s": 0.01, "attempts": 1} | values))


def fetch(url: str, **values) -> net.Reply:
    with net.HttpSession(limits(**values)) as session:
        return session.request("GET", url)


def full_text(exc: BaseException) -> str:
    """Everything Dagster could record of an exception: message, repr, chain, traceback."""
    return "".join(traceback.format_exception(exc)) + repr(exc)


class TestTotalDeadline:
    """A server that never goes quiet for long stops at the deadline, in any phase."""

    @pytest.mark.parametrize("phase", ["stall", "headers", "body", "chunked"])
    def test_trickle_stops_at_the_deadline(self, scripted, phase):
        url = scripted.route("/slow", trickle(phase, interval_s=0.05))
        started = time.monotonic()
        with pytest.raises(NetworkError) as err:
            fetch(url, deadline_s=0.8)
        elapsed = time.monotonic() - started
        assert str(err.value) == (
            f"{url}: failed after 1 attempt(s): no complete response within the 0.8 s "
            f"deadline ({PREFIX}_DEADLINE_S)"
        )
        # Each read arrives within 0.05 s, so only a total deadline can stop it; loose upper
        # bound for a loaded machine, far below the trickle's own 500 s.
        assert 0.8 <= elapsed < 5.0

    @pytest.mark.parametrize("attempts", [2, 3])
    def test_a_missed_deadline_is_retried(self, scripted, attempts):
        url = scripted.route("/slow", trickle("body", interval_s=0.05))
        with pytest.raises(NetworkError, match=f"failed after {attempts} attempt"):
            fetch(url, deadline_s=0.3, attempts=attempts)
        assert len(scripted.hits_when("/slow", attempts)) == attempts


class TestResponseSize:
    """The body is counted as it streams (decoded), whatever the server declares."""

    @pytest.mark.parametrize(
        ("handler", "cap"),
        [
            (reply(200, b"x" * 5000), 1000),  # declared too big: refused before reading
            (trickle("chunked", interval_s=0.0, count=3000), 1000),  # no length at all
            (reply(200, gzip_bomb(10 << 20), {"Content-Encoding": "gzip"}), 1 << 20),
            (reply(200, b"y" * 1001), 1000),  # one byte over
        ],
        ids=["declared", "chunked", "gzip-bomb", "one-over"],
    )
    def test_oversized_response_is_refused_and_not_retried(self, scripted, handler, cap):
        url = scripted.route("/big", handler)
        with pytest.raises(NetworkError) as err:
            fetch(url, max_response_bytes=cap, attempts=3)
        assert str(err.value) == (
            f"{url}: the response exceeds the {cap}-byte limit ({PREFIX}_MAX_RESPONSE_BYTES)"
        )
        assert len(scripted.hits("/big")) == 1

    @pytest.mark.parametrize("size", [0, 1, 999, 1000])
    def test_a_body_within_the_cap_arrives_whole(self, scripted, size):
        url = scripted.route("/ok", reply(200, b"z" * size))
        got = fetch(url, max_response_bytes=1000)
        assert (got.status, got.content, got.size) == (200, b"z" * size, size)


class TestRedirects:
    @pytest.mark.parametrize(
        ("routes", "start"),
        [
            ({"/a": "/a"}, "/a"),  # a loop on itself
            ({"/a": "/b", "/b": "/a"}, "/a"),  # a two-step loop
            ({"/1": "/2", "/2": "/3", "/3": "/4", "/4": "/5"}, "/1"),  # merely too long
        ],
        ids=["self", "pair", "chain"],
    )
    def test_redirect_loops_and_long_chains_stop_at_the_limit(self, scripted, routes, start):
        for path, target in routes.items():
            scripted.route(path, reply(302, headers={"Location": target + "?sig=" + SECRET}))
        with pytest.raises(NetworkError) as err:
            fetch(scripted.url + start + "?token=" + SECRET, max_redirects=2)
        assert str(err.value).startswith(
            f"{scripted.url}{start}?…: more than 2 redirect(s) ({PREFIX}_MAX_REDIRECTS); "
            f"the last one to {scripted.url}/"
        )
        assert SECRET not in full_text(err.value)
        assert len(scripted.requests) == 3  # the first request and 2 redirects

    @pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
    def test_redirects_within_the_limit_are_followed(self, scripted, status):
        scripted.route("/old", reply(status, headers={"Location": "/new"}))
        scripted.route("/new", reply(200, b"here"))
        got = fetch(scripted.url + "/old", max_redirects=1)
        assert (got.content, got.redirects) == (b"here", [scripted.url + "/new"])

    @pytest.mark.parametrize("cross_origin", [False, True])
    def test_session_headers_do_not_follow_to_another_origin(self, scripted, cross_origin):
        # 127.0.0.1 and localhost are different origins for the same server.
        other = scripted.url.replace("127.0.0.1", "localhost") if cross_origin else scripted.url
        scripted.route("/old", reply(307, headers={"Location": other + "/new"}))
        scripted.route("/new", reply(200, b"{}"))
        headers = {"Authorization": SECRET, "X-Api-Key": SECRET}
        with net.HttpSession(limits(), headers) as session:
            session.request("GET", scripted.url + "/old")
        sent = scripted.hits("/new")[0].headers
        assert ("Authorization" in sent, "X-Api-Key" in sent) == (not cross_origin,) * 2


class TestDecoding:
    @pytest.mark.parametrize(
        ("encoding", "body"),
        [
            ("gzip", b"not gzip at all"),
            ("gzip", gzip_bomb(100)[:10] + b"\xff" * 20),  # a gzip header, then garbage
            ("deflate", b"\x00\x01\x02 not deflate"),
        ],
    )
    def test_bad_content_encoding_is_one_clear_error(self, scripted, encoding, body):
        url = scripted.route("/enc", reply(200, body, {"Content-Encoding": encoding}))
        with pytest.raises(NetworkError) as err:
            fetch(url + "?key=SECRET", attempts=3)
        assert str(err.value) == (
            f"{url}?…: the response body could not be decoded (its Content-Encoding does not match)"
        )
        assert err.value.__cause__ is None and err.value.__context__ is None
        assert len(scripted.hits("/enc")) == 1

    @pytest.mark.parametrize("body", [b"", b"{", b"<html>", b"\xff\xfe", b'{"a": 1} trailing'])
    def test_bad_json_names_the_url(self, scripted, body):
        url = scripted.route("/json", reply(200, body))
        with pytest.raises(NetworkError) as err:
            fetch(url).json()
        assert str(err.value) == f"{url}: response is not valid JSON"
        assert err.value.__cause__ is None and err.value.__context__ is None


class TestRetries:
    @pytest.mark.parametrize(
        ("status", "retry_after"),
        [(429, "1"), (503, "1"), (429, "date")],
    )
    def test_retry_after_is_honoured(self, scripted, status, retry_after):
        if retry_after == "date":  # an HTTP date three seconds ahead: whole seconds, so the
            # wait is 2-3 s less the time until the reply arrives (>= 1 s on a loaded machine)
            retry_after = email.utils.formatdate(time.time() + 3, usegmt=True)
        url = scripted.route(
            "/busy",
            sequence(reply(status, b"busy", {"Retry-After": retry_after}), reply(200, b"ok")),
        )
        got = fetch(url, attempts=3, backoff_s=0.01)
        first, second = scripted.hits("/busy")
        assert got.content == b"ok" and got.attempts == 2 and len(scripted.requests) == 2
        # backoff alone would wait 0.01 s; the server asked for at least 1 s.
        assert 0.95 <= second.at - first.at < 4.0

    @pytest.mark.parametrize("status", [429, 503])
    def test_a_retry_after_beyond_the_limit_fails_at_once(self, scripted, status):
        url = scripted.route("/busy", reply(status, headers={"Retry-After": "120"}))
        with pytest.raises(NetworkError) as err:
            fetch(url, attempts=3, max_retry_after_s=10)
        assert str(err.value) == (
            f"{url}: HTTP {status}; the server asked to retry after 120 s, more than the 10 s "
            f"limit ({PREFIX}_MAX_RETRY_AFTER_S)"
        )
        assert len(scripted.requests) == 1

    @pytest.mark.parametrize("status", [408, 425, 429, 500, 502, 503, 504, 529])
    def test_transient_statuses_are_retried_with_backoff(self, scripted, status):
        url = scripted.route("/flaky", sequence(reply(status), reply(status), reply(200, b"ok")))
        got = fetch(url, attempts=3, backoff_s=0.2)
        first, second, third = scripted.hits("/flaky")
        assert (got.content, got.attempts) == (b"ok", 3)
        assert second.at - first.at >= 0.19 and third.at - second.at >= 0.39  # 0.2 s, 0.4 s

    @pytest.mark.parametrize("status", [503, 502])
    def test_transient_statuses_give_up_after_the_attempts(self, scripted, status):
        url = scripted.route("/down", reply(status))
        with pytest.raises(NetworkError) as err:
            fetch(url, attempts=3)
        assert str(err.value) == f"{url}: failed after 3 attempt(s): HTTP {status}"
        assert len(scripted.requests) == 3

    @pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 422])
    def test_client_errors_are_returned_once_never_retried(self, scripted, status):
        url = scripted.route("/no", reply(status, SECRET.encode()))
        assert fetch(url, attempts=3).status == status
        assert len(scripted.requests) == 1

    @pytest.mark.parametrize("status", [404, 401, 500])
    def test_download_treats_every_other_status_as_final(self, scripted, tmp_path, status):
        url = scripted.route("/file", reply(status, SECRET.encode()))
        with pytest.raises(NetworkError) as err:
            net.download(url, tmp_path / "f", limits(attempts=1))
        assert str(err.value).endswith(
            f"HTTP {status}" + ("" if status >= 500 else " (not retried)")
        )
        assert SECRET not in full_text(err.value)

    def test_a_dropped_connection_is_retried(self, scripted):
        def drop(h):
            h.close_connection = True  # closes without a response

        url = scripted.route("/drop", sequence(drop, reply(200, b"ok")))
        assert fetch(url, attempts=2).content == b"ok"
        assert len(scripted.requests) == 2

    @pytest.mark.parametrize("attempts", [1, 2])
    def test_connection_refused_is_retried_then_reported(self, attempts):
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]  # closed at once: nothing listens there
        with pytest.raises(NetworkError) as err:
            fetch(f"http://127.0.0.1:{port}/x", attempts=attempts)
        assert str(err.value) == (
            f"http://127.0.0.1:{port}/x: failed after {attempts} attempt(s): "
            "connection failed (ConnectError)"
        )

    @pytest.mark.parametrize("method", ["GE T", "GET\r\nX-Evil: 1", "G\u00e9T"])
    def test_a_local_protocol_error_is_never_retried(self, scripted, method):
        url = scripted.route("/x", reply(200))
        with pytest.raises(NetworkError) as err, net.HttpSession(limits(attempts=3)) as session:
            session.request(method, url)
        assert str(err.value).startswith(f"{url}: the request could not be sent (")
        assert scripted.requests == [] and err.value.__context__ is None


MALFORMED = [
    ("Bearer " + SECRET + "\n", "it contains a line break"),
    ("Bearer " + SECRET + "\r\nX-Evil: 1", "it contains a line break"),
    ("Bearer s\u00e9cr\u00e9t-" + SECRET, "it contains a non-ASCII character"),
    (" Bearer " + SECRET, "it has leading or trailing whitespace"),
    ("Bearer " + SECRET + "\t", "it has leading or trailing whitespace"),
    ("Bearer\x1b" + SECRET, "it contains a control character"),
    ("Bearer " + SECRET + "\x7f", "it contains a control character"),
    ("", "it is empty"),
]


class TestHeaderSecrets:
    @pytest.mark.parametrize(("value", "problem"), MALFORMED)
    def test_bad_env_value_names_header_and_variable_never_the_value(
        self, monkeypatch, value, problem
    ):
        monkeypatch.setenv("SEARCH_API_TOKEN", value)
        with pytest.raises(InputError) as err:
            net.headers_from_env({"Authorization": "SEARCH_API_TOKEN"}, "http://h/search")
        assert str(err.value) == (
            "http://h/search: headers_from_env.Authorization: environment variable "
            f"SEARCH_API_TOKEN is not a valid Authorization header value: {problem} "
            "(the value is not shown)"
        )
        text = full_text(err.value)
        assert SECRET not in text and "cr\u00e9t" not in text
        assert err.value.__context__ is None

    @pytest.mark.parametrize(("value", "problem"), MALFORMED)
    def test_a_session_refuses_bad_header_values_before_any_request(self, scripted, value, problem):
        with pytest.raises(InputError) as err:
            net.HttpSession(limits(), {"X-Api-Key": value})
        assert str(err.value) == (
            f"<input>: headers.X-Api-Key: invalid value: {problem} (the value is not shown)"
        )
        assert SECRET not in full_text(err.value) and scripted.requests == []

    @pytest.mark.parametrize("name", ["Bad Header", "X-Key:", "X-K\u00e9y", ""])
    def test_bad_header_names_are_refused(self, monkeypatch, name):
        monkeypatch.setenv("SEARCH_API_TOKEN", SECRET)
        with pytest.raises(InputError, match="not a valid header name"):
            net.headers_from_env({name: "SEARCH_API_TOKEN"})

    @pytest.mark.parametrize("variable", ["SEARCH_API_TOKEN", "OTHER_KEY"])
    def test_an_unset_variable_is_named(self, monkeypatch, variable):
        monkeypatch.delenv(variable, raising=False)
        with pytest.raises(InputError) as err:
            net.headers_from_env({"X-Api-Key": variable})
        assert str(err.value) == (
            f"<input>: headers_from_env.X-Api-Key: environment variable {variable} is not set"
        )

    @pytest.mark.parametrize(
        "value", [SECRET, "Bearer " + SECRET, "Basic dXNlcjpwYXNz", "a b  c", "~!#$%"]
    )
    def test_valid_values_reach_the_server_unchanged(self, scripted, monkeypatch, value):
        monkeypatch.setenv("SEARCH_API_TOKEN", value)
        headers = net.headers_from_env({"Authorization": "SEARCH_API_TOKEN"})
        url = scripted.route("/h", reply(200))
        with net.HttpSession(limits(), headers) as session:
            session.request("GET", url)
        assert scripted.requests[0].headers["Authorization"] == value


class TestLimitsFromEnvironment:
    @pytest.mark.parametrize(
        ("variable", "value", "field", "expected"),
        [
            ("DEADLINE_S", "2.5", "deadline_s", 2.5),
            ("MAX_RESPONSE_BYTES", "1024", "max_response_bytes", 1024),
            ("MAX_REDIRECTS", "0", "max_redirects", 0),
            ("ATTEMPTS", "7", "attempts", 7),
        ],
    )
    def test_each_limit_is_overridable(self, monkeypatch, variable, value, field, expected):
        monkeypatch.setenv(f"{PREFIX}_{variable}", value)
        assert getattr(net.NetLimits.from_env(PREFIX, deadline_s=9), field) == expected

    @pytest.mark.parametrize(
        ("variable", "value", "problem"),
        [
            ("DEADLINE_S", "0", "Input should be greater than 0"),
            ("DEADLINE_S", "soon", "Input should be a valid number"),
            ("ATTEMPTS", "0", "Input should be greater than or equal to 1"),
            ("MAX_RESPONSE_BYTES", "1.5", "Input should be a valid integer"),
        ],
    )
    def test_a_bad_override_names_the_variable(self, monkeypatch, variable, value, problem):
        monkeypatch.setenv(f"{PREFIX}_{variable}", value)
        with pytest.raises(InputError) as err:
            net.NetLimits.from_env(PREFIX)
        assert str(err.value).startswith(f"environment: {PREFIX}_{variable}: {problem}")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://127.0.0.1:8080/search", "http://127.0.0.1:8080/search"),
        ("https://user:pw@host/x?api_key=K", "https://host/x?…"),
        ("http://host/a?b=1#frag", "http://host/a?…"),
        ("http://host/p#frag", "http://host/p"),
        ("http://[::1/x", "<invalid URL>"),
    ],
)
def test_redact_url_drops_user_info_and_query(url, shown):
    assert net.redact_url(url) == shown


def test_deflate_is_decoded_when_valid(scripted):
    url = scripted.route("/d", reply(200, zlib.compress(b"hello"), {"Content-Encoding": "deflate"}))
    assert fetch(url).content == b"hello"


class TestPerRequestHeaders:
    @pytest.mark.parametrize(("value", "problem"), MALFORMED[:4])
    def test_bad_per_request_values_are_refused_before_sending(self, scripted, value, problem):
        url = scripted.route("/h", reply(200))
        with pytest.raises(InputError) as err, net.HttpSession(limits()) as session:
            session.request("GET", url, headers={"X-Key": value})
        assert str(err.value) == (
            f"{url}: headers.X-Key: invalid value: {problem} (the value is not shown)"
        )
        assert scripted.requests == []

    @pytest.mark.parametrize("cross_origin", [False, True])
    def test_per_request_headers_do_not_follow_to_another_origin(self, scripted, cross_origin):
        other = scripted.url.replace("127.0.0.1", "localhost") if cross_origin else scripted.url
        scripted.route("/old", reply(308, headers={"Location": other + "/new"}))
        scripted.route("/new", reply(200, b"{}"))
        # A POST re-sent to another origin needs the setting (test_net_bounds.py).
        allowed = limits(allow_cross_origin_redirects=True)
        with net.HttpSession(allowed) as session:
            session.request("POST", scripted.url + "/old", json={}, headers={"X-Key": SECRET})
        new = scripted.hits("/new")[0]
        assert ("X-Key" in new.headers, new.method) == (not cross_origin, "POST")

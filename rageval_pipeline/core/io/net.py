"""The one home for outbound HTTP: total deadlines, size caps, redirects, retries and secrets.

Every network call in the project goes through `HttpSession.request` (or `download`), so each
one has the same guarantees (docs/limits.md, "Network and archives"):

- a TOTAL deadline per attempt, from connect to the last body byte. httpx only has per-read
  timeouts, which a server trickling one byte at a time never trips; here each attempt runs
  under `asyncio.timeout` on a private event-loop thread, and cancellation closes the
  connection wherever it is (connect, headers or body);
- a response-size cap, counted on the decoded bytes while they are decoded, in pieces of at
  most 64 kB (`core.io.content_encoding`): a gzip bomb stops at the cap, never inflated first;
- a redirect limit; the headers we set (credentials) are dropped on a redirect to another
  origin, and a request that would carry its body (a POST's prompt) to another origin is
  refused unless `allow_cross_origin_redirects`;
- retries with exponential backoff that honour `Retry-After`, for transient failures only:
  connect/read errors, a server dropping the connection, the deadline, 408, 425, 429 and
  every 5xx (Anthropic's 529 "overloaded" among them). Any other 4xx, an invalid request
  (local protocol error), a bad Content-Encoding or an oversized body fails at once;
- every failure is a `NetworkError` (an `InputError`) naming the URL without its query string
  or user info, raised outside any `except` clause so it chains to nothing: httpx exceptions
  carry the request and its headers, and Dagster records chained exceptions. A response body
  is never quoted in an error (servers echo request headers in them).

Headers whose values come from the environment are validated before use (`headers_from_env`,
in `core.io.http_headers` with the other URL and header rules):
a bad one is an error naming the header and the variable, never the value.

Use (e.g. an LLM client; `HttpSession` is thread-safe and pools connections):

    limits = NetLimits.from_env("RAGEVAL_LLM", deadline_s=120)   # RAGEVAL_LLM_* override
                                      # (a new prefix: add it to core.settings.catalog)
    headers = headers_from_env({"x-api-key": "RAGEVAL_ANTHROPIC_API_KEY"})
    with HttpSession(limits, headers) as session:
        reply = session.request("POST", url, json=body, headers={"anthropic-version": "..."})
    if reply.status != 200: ...   # non-transient statuses come back; transient were retried
    data = reply.json()           # a NetworkError naming the URL when the body is not JSON
"""

from __future__ import annotations

import asyncio
import json as jsonlib
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rageval_pipeline.core.errors import NetworkError
from rageval_pipeline.core.io.content_encoding import ACCEPT_ENCODING, BodyDecoder, DecodeError
from rageval_pipeline.core.io.http_headers import check_headers, redact_url, retry_after_s
from rageval_pipeline.core.io.http_headers import (
    headers_from_env as headers_from_env,  # re-export  # re-export
)
from rageval_pipeline.core.settings.limits import NetLimits

if TYPE_CHECKING:  # imported where a request is made: loading the pipeline needs no httpx
    import httpx

T = TypeVar("T")
RETRY_STATUS = frozenset({408, 425, 429, *range(500, 600)})  # every 5xx: 529 "overloaded" too


@dataclass(frozen=True)
class Reply:
    """A complete response: its status, headers and body (empty when streamed to a file)."""

    url: str  # redacted: no query string or user info
    status: int
    headers: httpx.Headers
    content: bytes = b""
    size: int = 0
    elapsed_s: float = 0.0
    attempts: int = 1
    redirects: list[str] = field(default_factory=list)

    def json(self) -> Any:
        """The body as JSON; a `NetworkError` naming the URL when it is not (never chained:
        the decoder's exception holds the whole body, which may echo request headers)."""
        try:
            return jsonlib.loads(self.content)
        except ValueError:  # JSONDecodeError and UnicodeDecodeError both are
            pass
        raise NetworkError(self.url, "response is not valid JSON")


# --- the event-loop thread ---------------------------------------------------------------

_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_pid = 0


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on the process's network loop (a daemon thread) and wait for its result."""
    global _loop, _loop_pid
    with _loop_lock:
        if _loop is None or _loop_pid != os.getpid():  # a forked child needs its own thread
            _loop, _loop_pid = asyncio.new_event_loop(), os.getpid()
            threading.Thread(target=_loop.run_forever, name="rageval-net", daemon=True).start()
        loop = _loop
    return asyncio.run_coroutine_threadsafe(coro, loop).result()


@dataclass(frozen=True)
class _Call:
    """What one `request` sends and where its body goes, the same for every attempt."""

    method: str
    url: str
    json: Any
    headers: dict[str, str]
    dest: Path | None
    progress: Callable[[int, int | None], None] | None


class _Transient(Exception):
    """A failure worth another attempt; `reason` is safe to show, `wait_s` from Retry-After."""

    def __init__(self, reason: str, wait_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason, self.wait_s = reason, wait_s


# --- the session -------------------------------------------------------------------------


class HttpSession:
    """A pooled, thread-safe HTTP client bounded by `limits`. `headers` go on every request
    (validated; dropped on a redirect to another origin)."""

    def __init__(self, limits: NetLimits | None = None, headers: Mapping[str, str] | None = None):
        self.limits = limits or NetLimits()
        import httpx

        self._headers = check_headers(headers or {})
        timeout = httpx.Timeout(self.limits.deadline_s, connect=self.limits.connect_timeout_s)

        async def make() -> httpx.AsyncClient:
            # Accept-Encoding: only what `_finish` decodes (httpx's default grows with the
            # packages installed).
            headers = {"Accept-Encoding": ACCEPT_ENCODING, **self._headers}
            return httpx.AsyncClient(timeout=timeout, headers=headers)

        self._client = _run(make())

    def __enter__(self) -> HttpSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        _run(self._client.aclose())

    def request(
        self,
        method: str,
        url: str,
        *,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        dest: Path | None = None,
        progress: Callable[[int, int | None], None] | None = None,
    ) -> Reply:
        """One call with retries. Any status that is not transient is returned (the caller
        decides what a 404 means); transient ones are retried, then raised. `headers` are
        added to this request only (validated like the session's). With `dest`, the body is
        streamed into that file (rewritten on each attempt) instead of memory. A streamed
        answer (NDJSON, server-sent events) is read whole under the deadline: parse
        `Reply.content` line by line."""
        where, limits = redact_url(url), self.limits
        call = _Call(method, url, json, check_headers(headers or {}, where), dest, progress)
        started = time.monotonic()
        for attempt in range(1, limits.attempts + 1):
            try:
                reply = _run(self._attempt(call))
                return replace(reply, elapsed_s=time.monotonic() - started, attempts=attempt)
            except _Transient as exc:
                last = exc
            if attempt == limits.attempts:
                break
            wait = limits.backoff_s * 2 ** (attempt - 1)
            if last.wait_s is not None:
                if last.wait_s > limits.max_retry_after_s:
                    raise NetworkError(
                        where,
                        f"{last.reason}; the server asked to retry after {last.wait_s:g} s, "
                        f"more than the {limits.max_retry_after_s:g} s limit"
                        f"{limits.hint('max_retry_after_s')}",
                    )
                wait = max(wait, last.wait_s)
            time.sleep(wait)
        raise NetworkError(where, f"failed after {limits.attempts} attempt(s): {last.reason}")

    async def _attempt(self, call: _Call) -> Reply:
        import httpx

        limits, where = self.limits, redact_url(call.url)
        failure: Exception
        try:
            async with asyncio.timeout(limits.deadline_s):
                return await self._exchange(call)
        except NetworkError as exc:
            failure = exc
        except TimeoutError:
            failure = _Transient(
                f"no complete response within the {limits.deadline_s:g} s deadline"
                f"{limits.hint('deadline_s')}"
            )
        except httpx.TimeoutException as exc:
            failure = _Transient(f"timed out ({type(exc).__name__})")
        except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
            failure = _Transient(f"connection failed ({type(exc).__name__})")
        except DecodeError as exc:
            failure = NetworkError(where, str(exc))
        except (httpx.UnsupportedProtocol, httpx.InvalidURL):
            failure = NetworkError(where, "not a valid http(s) URL")
        except (httpx.HTTPError, UnicodeError, ValueError, TypeError) as exc:
            # e.g. LocalProtocolError: our own request is invalid. Its message may quote a
            # header value, so only the type is shown; retrying cannot help.
            failure = NetworkError(where, f"the request could not be sent ({type(exc).__name__})")
        # Raised here, outside the except clauses, so nothing chains to the httpx exception.
        raise failure

    async def _exchange(self, call: _Call) -> Reply:
        """Send, follow redirects up to the limit, and read the final response."""
        limits, where = self.limits, redact_url(call.url)
        request = self._client.build_request(
            call.method, call.url, json=call.json, headers=call.headers
        )
        redirects: list[str] = []
        while True:
            response = await self._client.send(request, stream=True)
            try:
                if not response.has_redirect_location:
                    return await self._finish(response, where, call, redirects)
                if len(redirects) >= limits.max_redirects:
                    raise NetworkError(
                        where,
                        f"more than {limits.max_redirects} redirect(s)"
                        f"{limits.hint('max_redirects')}; the last one to "
                        f"{redact_url(response.url.join(response.headers['location']))}",
                    )
                request = self._next(request, response, call, where)
                redirects.append(redact_url(request.url))
            finally:
                await response.aclose()

    def _next(
        self, request: httpx.Request, response: httpx.Response, call: _Call, where: str
    ) -> httpx.Request:
        """The redirected request (httpx's rules), without the headers we set (session and
        call: credentials among them) when it leads to another origin. A request that keeps
        its method there (a 307 or 308 of a POST) would re-send its body, often private
        (prompts, corpus text): refused unless the limits allow it."""
        follow = self._client._build_redirect_request(request, response)
        if _origin(follow.url) != _origin(request.url):
            if (
                follow.method not in ("GET", "HEAD")
                and not self.limits.allow_cross_origin_redirects
            ):
                name = "allow_cross_origin_redirects"
                setting = self.limits.variable(name) or name
                raise NetworkError(
                    where,
                    f"HTTP {response.status_code} redirects this {follow.method} to another "
                    f"origin ({redact_url(follow.url)}); not followed, so the request body is "
                    f"not sent there (set {setting} to true to allow it)",
                )
            for name in [*self._headers, *call.headers]:
                follow.headers.pop(name, None)
        return follow

    async def _finish(
        self, response: httpx.Response, where: str, call: _Call, redirects: list[str]
    ) -> Reply:
        limits, status = self.limits, response.status_code
        if status in RETRY_STATUS:
            raise _Transient(f"HTTP {status}", retry_after_s(response.headers.get("retry-after")))
        cap = limits.max_response_bytes
        declared = response.headers.get("content-length", "")
        too_big = f"the response exceeds the {cap}-byte limit{limits.hint('max_response_bytes')}"
        # An unknown encoding is refused before any byte is read; with one, the length is not
        # the size.
        decoder = BodyDecoder(response.headers.get("content-encoding", ""))
        if declared.isdigit() and int(declared) > cap and not decoder.stages:
            raise NetworkError(where, too_big)
        total = int(declared) if declared.isdigit() else None
        body = bytearray()
        size = 0
        sink = call.dest.open("wb") if call.dest is not None else None
        try:
            async for raw in _raw_then_end(response):
                for piece in decoder.feed(raw) if raw else decoder.finish():
                    size += len(piece)
                    if size > cap:
                        raise NetworkError(where, too_big)
                    if sink is not None:
                        sink.write(piece)
                    else:
                        body += piece
                if call.progress is not None:
                    call.progress(size, total)
        finally:
            if sink is not None:
                sink.close()
        return Reply(where, status, response.headers, bytes(body), size, redirects=redirects)


async def _raw_then_end(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's bytes as received (undecoded: httpx would inflate each chunk whole), then
    one empty chunk marking the end."""
    async for raw in response.aiter_raw():
        if raw:
            yield raw
    yield b""


def download(
    url: str,
    dest: Path,
    limits: NetLimits,
    progress: Callable[[int, int | None], None] | None = None,
) -> Reply:
    """GET `url` into `dest` under `limits`; any status but 200 is a `NetworkError`."""
    with HttpSession(limits) as session:
        reply = session.request("GET", url, dest=dest, progress=progress)
    if reply.status != 200:
        raise NetworkError(reply.url, f"HTTP {reply.status} (not retried)")
    return reply


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port

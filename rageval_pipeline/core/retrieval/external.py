"""The user's own system: a run file made elsewhere, an HTTP search endpoint, a Python function.

Interactive systems (HTTP, Python) answer one query at a time through `base.execute`, which
times each call. Each call has a timeout (HTTP: a total deadline per attempt, through
`core.io.net`) and is retried on transient failures (timeouts, connection errors, HTTP 408, 425,
429 and 5xx, honouring `Retry-After`) with exponential backoff; anything else fails at once.
Every failure is an `InputError` naming the URL or entry point and the field (execute adds
the query id), never a header value: credentials come from the environment and stay there.

A blank query (empty or whitespace only) returns no results without calling the system.
"""

from __future__ import annotations

import importlib
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from http import HTTPStatus
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io import formats, net
from rageval_pipeline.core.io.bounds import open_regular
from rageval_pipeline.core.io.chunk_ids import source_ids
from rageval_pipeline.core.retrieval.base import Hit
from rageval_pipeline.core.settings.limits import HTTP_SEARCH, HTTP_SEARCH_DEFAULTS
from rageval_pipeline.core.suites.passages import Locator, passage_id

MAX_TOP_K = 100  # an interactive query asks for 1..100 results (docs/systems.md)
_KNOWN_STATUS = {s.value for s in HTTPStatus}
T = TypeVar("T")


# --- the HTTP contract (docs/systems.md) -------------------------------------------------


class SearchRequest(BaseModel):
    query: str
    top_k: int = Field(ge=1, le=MAX_TOP_K)


class SearchResult(BaseModel):
    # strict: an id sent as a number or a score sent as a string is a contract error, not
    # something to coerce silently; unknown extra keys are ignored for forward compatibility.
    model_config = ConfigDict(strict=True)

    id: str | None = Field(default=None, min_length=1)
    score: Annotated[float, Field(allow_inf_nan=False)]
    source_id: str | None = None
    content: str | None = None
    metadata: dict[str, Any] | None = None
    # A passage of the team's own chunker (`core.suites.passages`): its text, located in the
    # corpus (in `source_id`'s document when given), or its character offsets, end exclusive.
    text: str | None = Field(default=None, min_length=1)
    doc_id: str | None = Field(default=None, min_length=1)
    start: int | None = Field(default=None, ge=0)
    end: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _named(self) -> SearchResult:
        offsets = (self.doc_id, self.start, self.end)
        if None in offsets and any(v is not None for v in offsets):
            raise ValueError("doc_id, start and end come together (a passage's offsets)")
        if self.id is None and self.doc_id is None:
            raise ValueError("a result needs an id, or doc_id, start and end")
        return self


class SearchResponse(BaseModel):
    model_config = ConfigDict(strict=True)

    results: list[SearchResult]


def field_path(loc: Sequence[str | int]) -> str:
    """Pydantic's error location as `a.b[2].c`."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _validation_error(where: str, exc: ValidationError, prefix: str = "") -> InputError:
    first = exc.errors()[0]
    loc = [prefix, *first["loc"]] if prefix else first["loc"]
    return InputError(where, first["msg"], field=field_path(loc))


def _hit(where: str, r: SearchResult, field: str, locator: Locator | None) -> Hit:
    """The result as a hit: a passage (offsets, or text located by `locator`) gets its passage
    id, anything else keeps its own id."""
    if r.doc_id is not None and r.start is not None and r.end is not None:
        problem = None if locator is None else locator.extent(r.doc_id, r.start, r.end)
        if problem is not None:
            raise InputError(where, problem, field=field)
        return Hit(passage_id(r.doc_id, r.start, r.end), r.score, r.doc_id)
    if r.text is not None and locator is not None:
        found = locator.locate(r.text, r.source_id)
        if found is None:
            raise InputError(
                where, "text found in no document of the corpus", field=f"{field}.text"
            )
        return Hit(passage_id(*found), r.score, found[0])
    assert r.id is not None  # SearchResult._named
    return Hit(r.id, r.score, r.source_id)


def _hits(
    where: str, results: Sequence[SearchResult], prefix: str, locator: Locator | None = None
) -> list[Hit]:
    hits = [_hit(where, r, f"{prefix}[{i}]", locator) for i, r in enumerate(results)]
    seen: set[str] = set()
    for i, hit in enumerate(hits):
        if hit.doc_id in seen:
            raise InputError(where, f"duplicate id {hit.doc_id!r}", field=f"{prefix}[{i}].id")
        seen.add(hit.doc_id)
    return hits


def _check_top_k(where: str, k: int) -> None:
    if not 1 <= k <= MAX_TOP_K:
        raise InputError(where, f"top_k must be between 1 and {MAX_TOP_K}, got {k}", field="top_k")


# --- retries -----------------------------------------------------------------------------


class _Transient(Exception):
    """A failure worth another attempt; its message is safe to show."""


def _with_retries(call: Callable[[], T], where: str, attempts: int, backoff_s: float) -> T:
    """`call()`, re-attempted on `_Transient` up to `attempts` times in all (0.5 s, 1 s, ...)."""
    attempt = 1
    while True:
        try:
            return call()
        except _Transient as exc:
            if attempt >= attempts:
                raise InputError(where, f"failed after {attempts} attempt(s): {exc}") from exc
            time.sleep(backoff_s * 2 ** (attempt - 1))
            attempt += 1


def _check_attempts(attempts: int, timeout_s: float) -> None:
    if attempts < 1 or timeout_s <= 0:
        raise ValueError(f"need attempts >= 1 and timeout_s > 0, got {attempts}, {timeout_s}")


# --- (b) HTTP endpoint -------------------------------------------------------------------


class HttpRetriever:
    """POST {"query", "top_k"} to `url`; expects 200 {"results": [{"id", "score", ...}]}.

    Calls go through `core.io.net` (one pooled session shared by every worker thread): each
    attempt has a total deadline of `timeout_s`, the body a size cap, and retries honour
    `Retry-After`. `RAGEVAL_HTTP_*` variables override these limits (docs/limits.md).
    `headers_from_env` maps a header to the environment variable holding its value (read
    and validated here; errors name the header and variable, never the value).
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 30.0,
        attempts: int = 3,
        headers: Mapping[str, str] | None = None,
        backoff_s: float = 0.5,
        headers_from_env: Mapping[str, str] | None = None,
        locator: Locator | None = None,
    ) -> None:
        _check_attempts(attempts, timeout_s)
        self.locator = locator  # finds passages returned as text (`core.suites.passages`)
        self.url = url
        self.where = net.redact_url(url)  # errors never show a query string (API keys hide there)
        limits = net.NetLimits.from_env(
            HTTP_SEARCH,
            **HTTP_SEARCH_DEFAULTS,
            deadline_s=timeout_s,
            attempts=attempts,
            backoff_s=backoff_s,
        )
        values = net.check_headers(headers or {}, self.where)
        values |= net.headers_from_env(headers_from_env or {}, self.where)
        self._session = net.HttpSession(limits, values)

    def close(self) -> None:
        self._session.close()

    def search(self, query: str, k: int) -> list[Hit]:
        _check_top_k(self.where, k)
        if not query.strip():
            return []
        body = SearchRequest(query=query, top_k=k).model_dump()
        reply = self._session.request("POST", self.url, json=body)
        if reply.status != 200:
            # The body is never quoted: a server may echo the request's headers there.
            phrase = HTTPStatus(reply.status).phrase if reply.status in _KNOWN_STATUS else ""
            status = f"HTTP {reply.status} {phrase}".strip()
            if reply.redirects:  # the status is the redirect target's, not this URL's
                hops = len(reply.redirects)
                status += f" at {reply.redirects[-1]}, after {hops} redirect{'s' * (hops > 1)}"
            raise InputError(self.where, f"{status} (not retried)")
        try:
            parsed = SearchResponse.model_validate_json(reply.content)
        except ValidationError as exc:
            if exc.errors()[0]["type"] == "json_invalid":
                raise InputError(self.where, "response is not valid JSON") from None
            raise _validation_error(self.where, exc) from None
        return _hits(self.where, parsed.results, "results", self.locator)


# --- (c) Python entry point --------------------------------------------------------------

_ENTRY_POINT = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def load_entry_point(entry_point: str, search_path: Path | None = None) -> Callable:
    """The function named by `module:function`; `search_path` is tried first for the module."""
    if not _ENTRY_POINT.match(entry_point):
        raise InputError(entry_point, "expected 'module:function'", field="entry_point")
    module_name, function_name = entry_point.split(":")
    if search_path is not None and str(search_path) not in sys.path:
        sys.path.insert(0, str(search_path))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(entry_point, f"cannot import {module_name!r}: {exc}") from exc
    function = getattr(module, function_name, None)
    if not callable(function):
        raise InputError(entry_point, f"{module_name!r} has no function {function_name!r}")
    return function


def _call_with_timeout(
    where: str, function: Callable[[str, int], Any], query: str, k: int, timeout_s: float
) -> Any:
    # Python cannot stop a thread: a call that overruns is abandoned (daemon thread) and its
    # late answer dropped, so one stuck call never holds up the run or the interpreter's exit.
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = function(query, k)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise _Transient(f"timed out after {timeout_s} s")
    if isinstance(box.get("error"), TimeoutError | ConnectionError):
        raise _Transient(f"{type(box['error']).__name__}: {box['error']}") from box["error"]
    if "error" in box:
        error = box["error"]
        raise InputError(where, f"raised {type(error).__name__}: {error}") from error
    return box["value"]


class PythonRetriever:
    """Calls `function(query: str, top_k: int)`; accepts (id, score) pairs, dicts or `Hit`s."""

    def __init__(
        self,
        entry_point: str,
        *,
        timeout_s: float = 30.0,
        attempts: int = 3,
        backoff_s: float = 0.5,
        search_path: Path | None = None,
        locator: Locator | None = None,
    ) -> None:
        _check_attempts(attempts, timeout_s)
        self.locator = locator  # finds passages returned as text (`core.suites.passages`)
        self.entry_point = entry_point
        self.function = load_entry_point(entry_point, search_path)
        self.timeout_s = timeout_s
        self.attempts = attempts
        self.backoff_s = backoff_s

    def search(self, query: str, k: int) -> list[Hit]:
        _check_top_k(self.entry_point, k)
        if not query.strip():
            return []
        raw = _with_retries(
            lambda: _call_with_timeout(self.entry_point, self.function, query, k, self.timeout_s),
            self.entry_point,
            self.attempts,
            self.backoff_s,
        )
        return _hits(self.entry_point, self._validate(raw), "result", self.locator)

    def _validate(self, raw: Any) -> list[SearchResult]:
        if not isinstance(raw, list | tuple):
            raise InputError(
                self.entry_point,
                f"returned {type(raw).__name__}; expected a list of (id, score), dicts or Hit",
                field="result",
            )
        out = []
        for i, item in enumerate(raw):
            if isinstance(item, Hit):
                item = item._asdict() | {"id": item.doc_id}
                del item["doc_id"]
            elif isinstance(item, list | tuple) and len(item) == 2:
                item = {"id": item[0], "score": item[1]}
            elif not isinstance(item, dict):
                raise InputError(
                    self.entry_point,
                    f"got {type(item).__name__}; expected (id, score), a dict or a Hit",
                    field=f"result[{i}]",
                )
            try:
                out.append(SearchResult.model_validate(item))
            except ValidationError as exc:
                raise _validation_error(self.entry_point, exc, f"result[{i}]") from None
        return out


# --- (a) run file ----------------------------------------------------------------------

RunFormat = Literal["auto", "trec", "parquet"]


def read_run_file(path: Path, format: RunFormat = "auto") -> pd.DataFrame:
    """A RUN table from a TREC 6-column or Parquet run file (`formats.read_run`).

    `format` other than `auto` is checked against the file's content. Where the file gives no
    source (TREC never does), a chunk id `{doc}:chunk:{n}` is credited to `{doc}`, so chunked
    systems can be judged against document-level qrels.
    """
    if format != "auto" and path.is_file():
        try:
            with open_regular(path) as (handle, _):
                found = "parquet" if handle.read(4) == b"PAR1" else "trec"
        except ValueError as exc:
            raise InputError(path, str(exc)) from None
        if found != format:
            raise InputError(path, f"declared {format} but the file is {found}", field="format")
    run = formats.read_run(path)
    derived = source_ids(run["doc_id"])
    run["source_id"] = run["source_id"].mask(run["source_id"] == run["doc_id"], derived)
    run["source_id"] = run["source_id"].fillna(run["doc_id"])
    return run

"""URLs and headers as `core.io.net` shows and sends them: URLs without their secrets, header
values checked before they go on the wire (a bad one is named, never quoted), and the
`Retry-After` a server asks for."""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.settings import environ

if TYPE_CHECKING:
    import httpx

_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # RFC 9110 header name


def redact_url(url: str | httpx.URL) -> str:
    """`url` without user info or query string (where API keys hide); `?…` marks a query."""
    import httpx

    try:
        parsed = httpx.URL(str(url))
    except Exception:
        return "<invalid URL>"
    shown = parsed.copy_with(userinfo=b"", query=None, fragment=None)
    return str(shown) + ("?…" if parsed.query else "")


def header_problem(value: str) -> str | None:
    """Why `value` cannot be sent as a header value, without quoting it; None when it can."""
    if not value:
        return "it is empty"
    if "\r" in value or "\n" in value:
        return "it contains a line break"
    if not value.isascii():
        return "it contains a non-ASCII character"
    if value != value.strip(" \t"):
        return "it has leading or trailing whitespace"
    if any(not 0x20 <= ord(c) <= 0x7E for c in value):
        return "it contains a control character"
    return None


def check_headers(headers: Mapping[str, str], where: str | None = None) -> dict[str, str]:
    """`headers` as a dict once every name and value is valid; errors never quote a value."""
    for name, value in headers.items():
        if not _HEADER_NAME.match(name):
            raise InputError(where, "not a valid header name", field=f"headers.{name!r}")
        problem = header_problem(value)
        if problem:
            raise InputError(
                where, f"invalid value: {problem} (the value is not shown)", field=f"headers.{name}"
            )
    return dict(headers)


def headers_from_env(mapping: Mapping[str, str], where: str | None = None) -> dict[str, str]:
    """`{header: ENV_VAR}` → `{header: value}`, each value read from the environment and
    validated. An error names the header and the variable, never the value."""
    out: dict[str, str] = {}
    for header, variable in mapping.items():
        at = f"headers_from_env.{header}"
        if not _HEADER_NAME.match(header):
            raise InputError(where, "not a valid header name", field=f"headers_from_env.{header!r}")
        value = environ.named(variable)
        if value is None:
            raise InputError(where, f"environment variable {variable} is not set", field=at)
        problem = header_problem(value)
        if problem:
            raise InputError(
                where,
                f"environment variable {variable} is not a valid {header} header value: "
                f"{problem} (the value is not shown)",
                field=at,
            )
        out[header] = value
    return out


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """Seconds asked by a `Retry-After` header (delta-seconds or HTTP date); None if absent."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))

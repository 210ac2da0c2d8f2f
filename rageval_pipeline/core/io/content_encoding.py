"""Decoding an HTTP body's Content-Encoding in bounded pieces, so a size cap holds while
decoding: a 300 kB gzip bomb never becomes 300 MB in memory before the cap is checked.

httpx's own decoders inflate each received chunk whole (zlib without `max_length`), so one
64 kB read of zeros comes out as 64 MB. Here every stage hands on at most `PIECE` bytes at a
time, and the caller counts them as they come. Only the encodings named in `ACCEPT_ENCODING`
are decoded (the standard library's zlib); any other is refused rather than passed through.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

ACCEPT_ENCODING = "gzip, deflate"  # what we ask servers for: exactly what we decode
PIECE = 64 << 10  # the most one stage produces per step
MISMATCH = "the response body could not be decoded (its Content-Encoding does not match)"


class DecodeError(Exception):
    """The body cannot be decoded as its Content-Encoding says; the message is safe to show."""


class _Inflater:
    """gzip, or deflate: zlib-wrapped as RFC 9110 says, or raw as some servers send it (told
    by its first two bytes, as browsers do); in bounded pieces."""

    def __init__(self, encoding: str) -> None:
        self.fed = False  # an empty body (e.g. a HEAD's) is no stream at all, not a cut one
        self.head = b""  # deflate's first bytes, until there are two to tell the variant
        self.inflater = zlib.decompressobj(zlib.MAX_WBITS | 16) if encoding == "gzip" else None

    def feed(self, data: bytes) -> Iterator[bytes]:
        self.fed = self.fed or bool(data)
        if self.inflater is None:
            self.head += data
            if len(self.head) < 2:
                return
            data, self.head = self.head, b""
            wrapped = data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0  # RFC 1950
            self.inflater = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        while True:
            try:
                piece = self.inflater.decompress(data, PIECE)
            except zlib.error:
                raise DecodeError(MISMATCH) from None
            if piece:
                yield piece
            data = self.inflater.unconsumed_tail
            if not data and len(piece) < PIECE:  # a full piece may leave output pending
                return

    def finish(self) -> Iterator[bytes]:
        yield from self.feed(b"")
        if self.fed and (self.inflater is None or not self.inflater.eof):  # cut short
            raise DecodeError(MISMATCH)


def _stages(content_encoding: str) -> list[_Inflater]:
    """The decoders of a Content-Encoding header, in the order they apply to the body (the
    reverse of the order the encodings were applied and are listed)."""
    names = [n.strip().lower() for n in content_encoding.split(",") if n.strip()]
    stages = []
    for name in reversed(names):
        name = "gzip" if name == "x-gzip" else name
        if name == "identity":
            continue
        if name not in ("gzip", "deflate"):
            raise DecodeError(
                f"the response's Content-Encoding {name[:40]!r} is not supported "
                f"(accepted: {ACCEPT_ENCODING})"
            )
        stages.append(_Inflater(name))
    return stages


class BodyDecoder:
    """Decodes a body fed in raw chunks, yielding pieces of at most `PIECE` bytes."""

    def __init__(self, content_encoding: str) -> None:
        self.stages = _stages(content_encoding)

    def feed(self, raw: bytes) -> Iterator[bytes]:
        yield from self._through(0, raw, last=False)

    def finish(self) -> Iterator[bytes]:
        yield from self._through(0, b"", last=True)

    def _through(self, at: int, data: bytes, last: bool) -> Iterator[bytes]:
        """`data` through stages `at`.. (lazily: nothing is decoded ahead of the consumer)."""
        if at == len(self.stages):
            if data:
                yield data
            return
        stage = self.stages[at]
        for piece in stage.feed(data):
            yield from self._through(at + 1, piece, last=False)
        if last:
            for piece in stage.finish():
                yield from self._through(at + 1, piece, last=False)
            yield from self._through(at + 1, b"", last=True)

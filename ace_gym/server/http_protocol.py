"""uvicorn's httptools HTTP protocol with bounds on what a client may make the server hold.

uvicorn reads request heads without a size limit and waits for a request's head and body for as
long as the client keeps the connection open. :class:`BoundedHttpProtocol` adds three limits
(``ServerConfig.max_header_bytes``, ``max_headers`` and ``request_timeout_s``):

* a request head (request line and headers) larger than ``max_header_bytes``, or with more than
  ``max_headers`` headers, is answered ``431`` and the connection closed, before the rest of it
  is read;
* a request must arrive whole (head and body) within ``request_timeout_s`` of its first byte, and
  the first request within ``request_timeout_s`` of the connection opening; a head that is late
  is answered ``408``, a late body ends the request as a client disconnect (one log line, by the
  app). Between requests, uvicorn's keep-alive timeout closes an idle connection; a WebSocket
  connection is timed only until its upgrade.

A head is counted from its first byte, on a keep-alive connection too; only a request pipelined
behind another in the same read has that read's part of its head counted when the head is
complete (so at most one read more than ``max_header_bytes`` is held).

:class:`BoundedHttpProtocol` is an ``asyncio.Protocol`` in front of uvicorn's own
``HttpToolsProtocol``, built as uvicorn builds any protocol class (``Config(http=...)``), and
talks to it through the ``asyncio.Protocol`` methods only: it reads each request's boundaries
with its own ``httptools`` parser, fed the bytes before uvicorn's protocol gets them, and answers
a refused head itself. Nothing of uvicorn's private code is copied or called, so any uvicorn
release with the httptools protocol serves it. After a WebSocket upgrade uvicorn's protocol hands
the transport to its WebSocket protocol, which then gets the bytes directly.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

logger = logging.getLogger(__name__)

_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}


class _HeadRefused(Exception):
    """Raised from a parser callback: the request head exceeds a bound."""


class BoundedHttpProtocol(asyncio.Protocol):
    """uvicorn's ``HttpToolsProtocol`` behind the head bounds and request timeout of :meth:`configured`."""

    max_header_bytes: ClassVar[int] = 64 << 10
    max_headers: ClassVar[int] = 100
    request_timeout_s: ClassVar[float] = 30.0

    @classmethod
    def configured(cls, max_header_bytes: int, max_headers: int, request_timeout_s: float) -> type[BoundedHttpProtocol]:
        """A subclass with these limits (uvicorn builds protocols from a class)."""
        limits = {
            "max_header_bytes": max_header_bytes,
            "max_headers": max_headers,
            "request_timeout_s": request_timeout_s,
        }
        return type(cls.__name__, (cls,), limits)

    def __init__(self, **uvicorn_arguments: Any) -> None:
        """``uvicorn_arguments``: what uvicorn passes a protocol class (``config``, ``server_state``, ...)."""
        self._inner = HttpToolsProtocol(**uvicorn_arguments)
        self._loop = uvicorn_arguments.get("_loop") or asyncio.get_event_loop()
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._passing = False  # after an upgrade or an unparsable request: uvicorn's protocol decides
        self._reading_head = True  # from the end of the previous request (or the start) to this head's end
        self._head_bytes = 0  # bytes received while reading the head
        self._headers = 0
        self._url_bytes = 0
        self._header_bytes = 0
        self._deadline: asyncio.TimerHandle | None = None

    # asyncio.Protocol: what the transport calls, handed on to uvicorn's protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._deadline = self._loop.call_later(self.request_timeout_s, self._time_out)
        self._inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._inner.connection_lost(exc)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def data_received(self, data: bytes) -> None:
        """Check ``data`` against the bounds, then hand it to uvicorn's protocol unless refused."""
        if not self._passing:
            if self._reading_head:
                self._head_bytes += len(data)
                if self._deadline is None:
                    self._deadline = self._loop.call_later(self.request_timeout_s, self._time_out)
            try:
                self._parser.feed_data(data)
            except _HeadRefused:
                return
            except httptools.HttpParserUpgrade:  # a WebSocket: its session has its own idle timeout
                self._passing = True
                self._disarm()
            except httptools.HttpParserError:  # uvicorn's protocol answers it (400)
                self._passing = True
                self._disarm()
            if self._closing():
                return
            if self._reading_head and self._head_bytes > self.max_header_bytes:  # a head still arriving
                self._refuse(431, f"the request head exceeds {self.max_header_bytes} bytes")
                return
        self._inner.data_received(data)

    # httptools callbacks of this protocol's own parser

    def on_message_begin(self) -> None:
        self._reading_head = True
        self._headers = self._url_bytes = self._header_bytes = 0
        if self._deadline is None:
            self._deadline = self._loop.call_later(self.request_timeout_s, self._time_out)

    def on_url(self, url: bytes) -> None:
        self._url_bytes += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers += 1
        self._header_bytes += len(name) + len(value) + 4
        if self._headers > self.max_headers:
            self._refuse(431, f"the request has more than {self.max_headers} headers")
            raise _HeadRefused

    def on_headers_complete(self) -> None:
        if self._url_bytes + self._header_bytes > self.max_header_bytes:  # a head that arrived in one piece
            self._refuse(431, f"the request head exceeds {self.max_header_bytes} bytes")
            raise _HeadRefused
        self._reading_head = False
        self._head_bytes = 0

    def on_message_complete(self) -> None:
        self._disarm()
        self._reading_head = True  # the connection's next byte starts the next request's head
        self._head_bytes = 0

    # the bounds

    def _closing(self) -> bool:
        return self._transport is None or self._transport.is_closing()

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _time_out(self) -> None:
        self._deadline = None
        if self._closing() or self._passing:
            return
        if self._reading_head:
            self._refuse(408, f"no complete request head within {self.request_timeout_s} s")
        else:  # the app is reading the body: closing ends it as a disconnect, which the app logs
            logger.debug("%s: the request body did not arrive within %s s", self._peer(), self.request_timeout_s)
            assert self._transport is not None
            self._transport.close()

    def _refuse(self, status: int, why: str) -> None:
        """Answer ``status`` with ``why`` as text, close the connection, log one line."""
        logger.info("%s: %s: answered %d and closed the connection", self._peer(), why, status)
        self._disarm()
        if self._closing():
            return
        assert self._transport is not None
        body = why.encode()
        self._transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n%s" % (status, _REASONS[status], len(body), body)
        )
        self._transport.close()

    def _peer(self) -> str:
        client = self._transport.get_extra_info("peername") if self._transport is not None else None
        return f"{client[0]}:{client[1]}" if isinstance(client, tuple) and len(client) >= 2 else "a client"

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
complete (so at most one read more than ``max_header_bytes`` is held). The checks cost one timer
and a few additions per request, nothing per WebSocket frame.

:class:`BoundedHttpProtocol` overrides ``data_received`` with a copy of uvicorn's and calls
private methods of :class:`HttpToolsProtocol`; ``pyproject.toml`` pins uvicorn to the versions
checked, and ``tests/server/test_http_protocol.py`` fails if uvicorn's copy or those methods change.
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


class BoundedHttpProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` with the head bounds and request timeout of :meth:`configured`."""

    max_header_bytes: ClassVar[int] = 64 << 10
    max_headers: ClassVar[int] = 100
    request_timeout_s: ClassVar[float] = 30.0

    @classmethod
    def configured(cls, max_header_bytes: int, max_headers: int, request_timeout_s: float) -> type[HttpToolsProtocol]:
        """A subclass with these limits (uvicorn builds protocols from a class)."""
        limits = {
            "max_header_bytes": max_header_bytes,
            "max_headers": max_headers,
            "request_timeout_s": request_timeout_s,
        }
        return type(cls.__name__, (cls,), limits)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # from the end of the previous request (or the connection's start) to the end of this one's headers
        self._reading_head = True
        self._head_bytes = 0  # bytes received while reading the head
        self._deadline: asyncio.TimerHandle | None = self.loop.call_later(self.request_timeout_s, self._time_out)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """uvicorn's ``data_received``, plus the head bounds; a callback that refused the head has
        already answered (uvicorn would add a 400 and a warning)."""
        if self._reading_head:
            self._head_bytes += len(data)
            if self._deadline is None:
                self._deadline = self.loop.call_later(self.request_timeout_s, self._time_out)
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if not self.transport.is_closing():  # not refused by a callback below
                message = "Invalid HTTP request received."
                self.logger.warning(message)
                self.send_400_response(message)
            return
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        if self._reading_head and self._head_bytes > self.max_header_bytes:  # a head still arriving
            self._refuse(431, f"the request head exceeds {self.max_header_bytes} bytes")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._reading_head = True
        if self._deadline is None:
            self._deadline = self.loop.call_later(self.request_timeout_s, self._time_out)

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(self.headers) >= self.max_headers:
            self._refuse(431, f"the request has more than {self.max_headers} headers")
            raise _HeadRefused  # stops the parser; data_received sees the transport closing
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        head_bytes = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
        if head_bytes > self.max_header_bytes:  # a head that arrived in one piece
            self._refuse(431, f"the request head exceeds {self.max_header_bytes} bytes")
            raise _HeadRefused
        self._reading_head = False
        self._head_bytes = 0
        if self.parser.should_upgrade() and self._should_upgrade():
            self._disarm()  # a WebSocket: its session has its own idle timeout
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        self._reading_head = True  # the connection's next byte starts the next request's head
        self._head_bytes = 0
        super().on_message_complete()

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _time_out(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._reading_head:
            self._refuse(408, f"no complete request head within {self.request_timeout_s} s")
        else:  # the app is reading the body: closing ends it as a disconnect, which the app logs
            logger.debug("%s: the request body did not arrive within %s s", self._peer(), self.request_timeout_s)
            self.transport.close()

    def _refuse(self, status: int, why: str) -> None:
        """Answer ``status`` with ``why`` as text, close the connection, log one line."""
        logger.info("%s: %s: answered %d and closed the connection", self._peer(), why, status)
        self._disarm()
        body = why.encode()
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n%s" % (status, _REASONS[status], len(body), body)
        )
        self.transport.close()

    def _peer(self) -> str:
        client: Any = self.client
        return f"{client[0]}:{client[1]}" if client else "a client"

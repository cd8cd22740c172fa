"""A minimal asyncio WebSocket client for load generation (RFC 6455, ``ws://`` only).

A load generator should cost little next to the server it measures (as wrk or k6 do). This client
is an ``asyncio.Protocol``: the HTTP upgrade handshake (``Sec-WebSocket-Accept`` checked), frames
the caller masks once and sends many times (``mask_frame``), server frames parsed incrementally
(text and binary, 7/16/64-bit lengths, fragmented messages, ping answered with pong, close answered
and reported), and one request in flight per connection (``request`` waits for the next message).

RFC 6455 asks for a fresh unpredictable mask key per frame so that a hostile script cannot steer
the bytes a proxy sees; on loopback, with no proxy, a benchmark may mask every frame of a
connection with one random key, which lets each fixed frame be masked once. Not for anything but
benchmarks: no TLS, no extensions, no subprotocols.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import struct
from urllib.parse import urlsplit

HANDSHAKE_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT, BINARY, CONTINUATION, CLOSE, PING, PONG = 0x1, 0x2, 0x0, 0x8, 0x9, 0xA
NORMAL_CLOSURE = 1000


class WebSocketError(ConnectionError):
    """The handshake failed, the server broke the protocol, or the connection closed."""


def mask_frame(payload: bytes, mask: bytes, opcode: int = TEXT) -> bytes:
    """One unfragmented client frame (FIN set) carrying ``payload`` masked with the 4-byte ``mask``."""
    length = len(payload)
    if length < 126:
        header = struct.pack("!BB", 0x80 | opcode, 0x80 | length)
    elif length < 1 << 16:
        header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, length)
    else:
        header = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, length)
    repeated = (mask * (length // 4 + 1))[:length]
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes(repeated, "big")).to_bytes(length, "big")
    return header + mask + masked


def accept_key(key: bytes) -> bytes:
    """The ``Sec-WebSocket-Accept`` a server must answer to ``Sec-WebSocket-Key: key``."""
    return base64.b64encode(hashlib.sha1(key + HANDSHAKE_GUID).digest())


class RawWebSocket(asyncio.Protocol):
    """One client connection; open it with ``connect``. Messages arrive as ``bytes`` (text frames
    undecoded: the caller decodes its JSON straight from them)."""

    def __init__(self, host: str, path: str) -> None:
        self.mask = os.urandom(4)
        self.key = base64.b64encode(os.urandom(16))
        self.request_head = (
            f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {self.key.decode()}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
        loop = asyncio.get_running_loop()
        self.handshake: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        self.reply: asyncio.Future[bytes] | None = None
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.fragments: list[bytes] = []
        self.close_sent = False
        self.error: WebSocketError | None = None

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a TCP transport (asyncio's or uvloop's)
        transport.write(self.request_head)

    def data_received(self, data: bytes) -> None:
        if not self.handshake.done():
            self.buffer += data
            head, found, rest = bytes(self.buffer).partition(b"\r\n\r\n")
            if not found:
                return
            self.buffer.clear()
            self.check_handshake(head)
            if self.error is not None:
                return
            data = rest
        try:
            if self.buffer:
                self.buffer += data
                consumed = self.parse(self.buffer)
                del self.buffer[:consumed]
            else:  # the usual case: one or more whole frames, parsed without copying them first
                consumed = self.parse(data)
                self.buffer += data[consumed:]
        except WebSocketError as error:
            self.fail(error)

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(WebSocketError(f"connection lost: {exc}" if exc else "connection closed"))

    # the client's side

    async def request(self, frame: bytes) -> bytes:
        """Send a frame made by ``mask_frame`` and return the payload of the next server message."""
        if self.error is not None:
            raise self.error
        self.reply = asyncio.get_running_loop().create_future()
        assert self.transport is not None
        self.transport.write(frame)
        return await self.reply

    def frame(self, payload: bytes, opcode: int = TEXT) -> bytes:
        """``payload`` as a frame of this connection (its mask), to pass to ``request`` any number of times."""
        return mask_frame(payload, self.mask, opcode)

    async def close(self, timeout: float = 5.0) -> None:
        """Closing handshake (code 1000), then the TCP connection."""
        self.send_close()
        try:
            await asyncio.wait_for(asyncio.shield(self.closed), timeout)
        except (asyncio.TimeoutError, WebSocketError):
            pass
        finally:
            if self.transport is not None:
                self.transport.close()

    # internals

    def check_handshake(self, head: bytes) -> None:
        status, *lines = head.decode("latin-1").split("\r\n")
        headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
        if status.split(" ", 2)[1:2] != ["101"]:
            self.fail(WebSocketError(f"handshake refused: {status}"))
        elif headers.get("sec-websocket-accept", "").encode() != accept_key(self.key):
            self.fail(WebSocketError("handshake: wrong Sec-WebSocket-Accept"))
        elif headers.get("upgrade", "").lower() != "websocket":
            self.fail(WebSocketError("handshake: no Upgrade: websocket"))
        else:
            self.handshake.set_result(None)

    def parse(self, data: bytes | bytearray) -> int:
        """Handle every whole frame at the start of ``data``; return the bytes consumed."""
        offset, size = 0, len(data)
        while size - offset >= 2:
            first, second = data[offset], data[offset + 1]
            if second & 0x80:
                raise WebSocketError("server frame is masked")
            if first & 0x70:
                raise WebSocketError("reserved bits set (no extension was negotiated)")
            length, start = second & 0x7F, offset + 2
            if length == 126:
                if size - start < 2:
                    break
                (length,) = struct.unpack_from("!H", data, start)
                start += 2
            elif length == 127:
                if size - start < 8:
                    break
                (length,) = struct.unpack_from("!Q", data, start)
                start += 8
            end = start + length
            if end > size:
                break
            self.on_frame(first & 0x80, first & 0x0F, bytes(data[start:end]))
            offset = end
        return offset

    def on_frame(self, fin: int, opcode: int, payload: bytes) -> None:
        if opcode in (TEXT, BINARY):
            if self.fragments:
                raise WebSocketError("new message inside a fragmented one")
            if fin:
                self.deliver(payload)
            else:
                self.fragments.append(payload)
        elif opcode == CONTINUATION:
            if not self.fragments:
                raise WebSocketError("continuation frame without a message")
            self.fragments.append(payload)
            if fin:
                message, self.fragments = b"".join(self.fragments), []
                self.deliver(message)
        elif opcode == PING:
            assert self.transport is not None
            self.transport.write(self.frame(payload, PONG))
        elif opcode == CLOSE:
            self.send_close()
            if not self.closed.done():
                self.closed.set_result(None)
            code = struct.unpack_from("!H", payload)[0] if len(payload) >= 2 else None
            self.fail(WebSocketError(f"server closed the connection (code {code})"))
        elif opcode != PONG:
            raise WebSocketError(f"unknown opcode {opcode:#x}")

    def deliver(self, message: bytes) -> None:
        reply, self.reply = self.reply, None
        if reply is None or reply.done():
            self.fail(WebSocketError("a message with no request in flight"))
        else:
            reply.set_result(message)

    def send_close(self) -> None:
        if not self.close_sent and self.transport is not None and not self.transport.is_closing():
            self.close_sent = True
            self.transport.write(self.frame(struct.pack("!H", NORMAL_CLOSURE), CLOSE))

    def fail(self, error: WebSocketError) -> None:
        """Record the first error, wake whoever waits, and drop the connection unless closing cleanly."""
        if self.error is None:
            self.error = error
        for waiter in (self.handshake, self.reply):
            if waiter is not None and not waiter.done():
                waiter.set_exception(self.error)
        if not self.closed.done():
            self.closed.set_exception(self.error)
            self.closed.exception()  # retrieved: nobody need await it
            if self.transport is not None and not self.close_sent:
                self.transport.close()


async def connect(url: str) -> RawWebSocket:
    """Open ``ws://host:port/path`` and complete the upgrade handshake."""
    parts = urlsplit(url)
    if parts.scheme != "ws" or parts.hostname is None:
        raise ValueError(f"only ws://host[:port]/path URLs: {url!r}")
    port = parts.port or 80
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    loop = asyncio.get_running_loop()
    _, connection = await loop.create_connection(
        lambda: RawWebSocket(f"{parts.hostname}:{port}", path), parts.hostname, port
    )
    await connection.handshake
    return connection

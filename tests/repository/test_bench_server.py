"""benchmarks/bench_server.py and its raw WebSocket load-generator client (benchmarks/raw_websocket.py)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.benchmark_scripts import load_benchmark

ROOT = Path(__file__).resolve().parents[2]
raw_websocket = load_benchmark("raw_websocket")


class _Transport:
    """What the protocol writes, and whether it closed the connection."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def _server_frame(payload: bytes, opcode: int = 0x1, fin: bool = True) -> bytes:
    """An unmasked server frame, built independently of the client's code."""
    first = (0x80 if fin else 0) | opcode
    if len(payload) < 126:
        return bytes([first, len(payload)]) + payload
    if len(payload) < 1 << 16:
        return bytes([first, 126]) + struct.pack("!H", len(payload)) + payload
    return bytes([first, 127]) + struct.pack("!Q", len(payload)) + payload


def _unmask(frame: bytes) -> tuple[int, bytes]:
    """(first byte, payload) of a masked client frame."""
    length, start = frame[1] & 0x7F, 2
    if length == 126:
        (length,), start = struct.unpack_from("!H", frame, 2), 4
    elif length == 127:
        (length,), start = struct.unpack_from("!Q", frame, 2), 10
    assert frame[1] & 0x80, "client frames are masked"
    mask, body = frame[start : start + 4], frame[start + 4 :]
    assert len(body) == length
    return frame[0], bytes(byte ^ mask[index % 4] for index, byte in enumerate(body))


def _open_protocol() -> tuple[Any, _Transport]:
    """A RawWebSocket past its handshake, on a fake transport (call inside a running loop)."""
    connection = raw_websocket.RawWebSocket("127.0.0.1:1", "/ws")
    transport = _Transport()
    connection.connection_made(transport)
    head = transport.written[0].decode()
    key = next(line.split(": ")[1] for line in head.split("\r\n") if line.startswith("Sec-WebSocket-Key"))
    accept = raw_websocket.accept_key(key.encode()).decode()
    connection.data_received(
        f"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Accept: {accept}\r\n\r\n".encode()
    )
    assert connection.handshake.done() and connection.handshake.exception() is None
    return connection, transport


def test_accept_key__matches_the_rfc_6455_example() -> None:
    assert raw_websocket.accept_key(b"dGhlIHNhbXBsZSBub25jZQ==") == b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


@pytest.mark.parametrize("size", [0, 5, 125, 126, 65535, 65536, 70000])
def test_mask_frame__masks_every_length_form_with_the_given_key(size: int) -> None:
    payload = random.Random(size).randbytes(size)
    frame = raw_websocket.mask_frame(payload, b"\x01\x02\x03\x04")
    first, unmasked = _unmask(frame)
    assert first == 0x81 and unmasked == payload


def test_raw_websocket__parses_messages_split_anywhere_with_fragments_pings_and_every_length() -> None:
    messages = [b"x" * 3, b"y" * 200, b"z" * 70000, b'{"type": "observation"}']
    wire = [
        _server_frame(messages[0]),
        _server_frame(b"ping me", opcode=0x9) + _server_frame(messages[1]),
        _server_frame(messages[2]),
        _server_frame(messages[3][:5], fin=False)
        + _server_frame(b"", opcode=0xA)
        + _server_frame(messages[3][5:12], opcode=0x0, fin=False)
        + _server_frame(messages[3][12:], opcode=0x0),
    ]
    chunking = random.Random(0)

    async def play() -> None:
        connection, transport = _open_protocol()
        for message, data in zip(messages, wire, strict=True):
            waiting = asyncio.ensure_future(connection.request(connection.frame(b"step")))
            await asyncio.sleep(0)
            cuts = sorted(chunking.sample(range(1, len(data)), min(5, len(data) - 1)))
            for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
                connection.data_received(data[start:end])
            assert await waiting == message
        pongs = [_unmask(frame) for frame in transport.written[1:] if frame[0] == 0x8A]
        assert [payload for _, payload in pongs] == [b"ping me"]
        assert not transport.closed and connection.error is None

    asyncio.run(play())


def test_raw_websocket__server_close_fails_the_request_and_is_answered() -> None:
    async def play() -> None:
        connection, transport = _open_protocol()
        waiting = asyncio.ensure_future(connection.request(connection.frame(b"step")))
        await asyncio.sleep(0)
        connection.data_received(_server_frame(struct.pack("!H", 1011) + b"bye", opcode=0x8))
        with pytest.raises(raw_websocket.WebSocketError, match="1011"):
            await waiting
        assert _unmask(transport.written[-1]) == (0x88, struct.pack("!H", 1000))

    asyncio.run(play())


def test_raw_websocket__wrong_accept_key_fails_the_handshake() -> None:
    async def play() -> None:
        connection = raw_websocket.RawWebSocket("127.0.0.1:1", "/ws")
        transport = _Transport()
        connection.connection_made(transport)
        connection.data_received(b"HTTP/1.1 101 OK\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: AAAA\r\n\r\n")
        with pytest.raises(raw_websocket.WebSocketError, match="Accept"):
            await connection.handshake
        assert transport.closed

    asyncio.run(play())


@pytest.fixture(scope="module")
def bench_server() -> Any:
    """benchmarks/bench_server.py as a module (it needs the serve extra's orjson)."""
    pytest.importorskip("orjson", reason="the serve extra installs orjson")
    return load_benchmark("bench_server")  # it imports raw_websocket by name: registered above


def _report(server: str, steps_per_s: float, p99_ms: float) -> dict[str, Any]:
    return {
        "server": server,
        "steps_per_s": steps_per_s,
        "p50_ms": 1.0,
        "p99_ms": p99_ms,
        "server_cpu_us_per_step": 100.0,
    }


@pytest.mark.parametrize(
    ("steps_per_s", "p99_ms", "within"),
    [(8_100, 2.4, True), (10_500, 1.0, True), (7_900, 2.0, False), (10_000, 2.5, False)],
)
def test_comparison__applies_the_20_percent_rule_to_the_mean_of_the_rounds(
    bench_server: Any, steps_per_s: float, p99_ms: float, within: bool
) -> None:
    reports = [_report("ace-gym", 9_000, 1.5), _report("openenv", steps_per_s, p99_ms), _report("ace-gym", 11_000, 2.5)]
    reports.append(_report("openenv", steps_per_s, p99_ms))
    result = bench_server.comparison(reports)
    assert result["baseline"] == "ace-gym" and result["rounds"] == 2
    assert result["ace-gym"]["steps_per_s"] == 10_000 and result["ace-gym"]["p99_ms"] == 2.0
    ratios = result["openenv_vs_ace-gym"]
    assert ratios["steps_per_s"] == round(steps_per_s / 10_000, 3) and ratios["p99_ms"] == round(p99_ms / 2.0, 3)
    assert ratios["within_20_percent"] is within


@pytest.mark.slow
def test_bench_server__quick_run_of_both_servers_counts_steps_without_errors() -> None:
    pytest.importorskip("openenv.core")
    completed = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_server.py"), "--quick", "--server", "ace-gym", "openenv"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    *reports, compared = [json.loads(line) for line in completed.stdout.strip().splitlines()]
    assert [r["server"] for r in reports] == ["ace-gym", "openenv"]
    for report in reports:
        assert report["client"] == "raw" and report["sessions"] == 20 and report["workers"] == 1
        assert report["failed_sessions"] == 0, report["first_session_failure"]
        assert report["errors"] == 0
        assert report["steps"] > 100 and report["resets"] > 0
        assert report["client_cpu_us_per_step"] > 0 and report["server_cpu_us_per_step"] > 0
    assert reports[0]["server_logged_errors"] == 0
    assert set(compared["comparison"]["openenv_vs_ace-gym"]) >= {"steps_per_s", "p99_ms", "within_20_percent"}

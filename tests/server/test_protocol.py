"""The wire format's encoder and the session's quick resets (ace_gym.server.protocol, .sessions)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("orjson", reason="the serve extra installs orjson")

from ace_gym.server import protocol, sessions
from ace_gym.server.factory import EnvFactory
from ace_gym.server.mcp import ToolProbes
from ace_gym.server.sessions import SessionStore
from ace_gym.server.websocket import _answer

PAYLOADS: list[Any] = [
    {"type": "observation", "data": {"value": 'é ✓ \u2028 \x01 "q" /', "reward": 0.1 + 0.2, "done": False}},
    {"floats": [1e20, 5e-324, -0.0, 1e16, float("nan"), float("inf")], "none": None, "big": 2**63 - 1},
    {"tuple": (1, (2, 3)), "nested": [[{"a": []}]], "bool": True},
    {"numpy": np.arange(3), "scalar": np.float32(0.1), "int": np.int64(7)},
    {1: "integer key", None: "null key", 2.5: "float key"},
    {"surrogate": "a\ud800b", "pair": "\ud83d\ude00"},
    {"huge": 2**70, "object": object.__name__},
]


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
def test_dumps__orjson_writes_the_standard_library_text(payload: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = protocol.dumps(payload)
    monkeypatch.setattr(protocol, "orjson", None)
    assert fast == protocol.dumps(payload)
    json.loads(fast)


FRAMES: list[str | bytes] = [
    '{"type": "step", "data": {"name": "set_slot", "arguments": {"row": 1, "col": 2, "id": "C17"}}}',
    '{"a": 1, "a": 2}',  # the last duplicate wins
    "18446744073709551615",  # the largest unsigned 64-bit integer
    "18446744073709551616",  # past 64 bits: orjson would read a float
    "-9223372036854775809",
    '{"row": 123456789012345678901234567890}',
    "0.30000000000000004441",
    "1e400",  # out of float range: the standard library reads inf
    "NaN",
    '"\\ud800"',  # a lone surrogate escape
    '"\\u00e9 \\n"',
    "-0.0",
    "[1, 2,]",
    '{"a": 1} x',
    "\ufeff{}",
    "[" * 5000 + "]" * 5000,  # deeper than orjson reads
    "[" * 100_000,
    b'{"bytes": true}',
    b'{"bad utf-8": "\xff"}',
    "",
]
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def _decoded(raw: str | bytes) -> str:
    """What ``decode`` makes of ``raw``: the repr of its value (types, -0.0, nan) or its error."""
    try:
        return repr(protocol.decode(raw))
    except protocol.ProtocolError as error:
        return str(error)


@pytest.mark.parametrize("raw", FRAMES, ids=range(len(FRAMES)))
def test_decode__orjson_reads_the_standard_library_value(raw: str | bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _decoded(raw)
    monkeypatch.setattr(protocol, "orjson", None)
    assert fast == _decoded(raw)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_decode__random_json_reads_as_the_standard_library_does(value: Any) -> None:
    text = json.dumps(value)
    assert _decoded(text) == repr(json.loads(text))


def _reset_thread(quick_reset_s: float, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """(the event loop's thread, the thread of a WebSocket session's second reset)."""
    monkeypatch.setattr(sessions, "QUICK_RESET_S", quick_reset_s)
    session = SessionStore(4, 600).open("ACE-course-v0", "websocket")
    factory = EnvFactory(["ACE-course-v0"])
    threads: list[int] = []

    async def play() -> int:
        probes = ToolProbes(factory)  # its semaphore belongs to this event loop
        await _answer(session, factory, probes, '{"type": "reset", "data": {"seed": 0}}')
        reset = session.env.reset  # type: ignore[union-attr]

        def recording_reset(**kwargs: Any) -> Any:
            threads.append(threading.get_ident())
            return reset(**kwargs)

        session.env.reset = recording_reset  # type: ignore[union-attr, method-assign]
        reply = json.loads(await _answer(session, factory, probes, '{"type": "reset", "data": {"seed": 1}}') or "")
        assert reply["type"] == "observation"
        return threading.get_ident()

    return asyncio.run(play()), threads[0]


def test_session__a_quick_reset_runs_on_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    loop_thread, reset_thread = _reset_thread(60.0, monkeypatch)
    assert reset_thread == loop_thread


def test_session__a_slow_reset_runs_in_a_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    loop_thread, reset_thread = _reset_thread(0.0, monkeypatch)
    assert reset_thread != loop_thread

"""The wire format's encoder and the session's quick resets (ace_gym.server.protocol, .sessions)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import numpy as np
import pytest

pytest.importorskip("orjson", reason="the serve extra installs orjson")

from ace_gym.server import protocol, sessions
from ace_gym.server.app import _answer
from ace_gym.server.factory import EnvFactory
from ace_gym.server.sessions import SessionStore

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


def _reset_thread(quick_reset_s: float, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """(the event loop's thread, the thread of a WebSocket session's second reset)."""
    monkeypatch.setattr(sessions, "QUICK_RESET_S", quick_reset_s)
    session = SessionStore(4, 600).open("ACE-course-v0", "websocket")
    factory = EnvFactory(["ACE-course-v0"])
    threads: list[int] = []

    async def play() -> int:
        await _answer(session, factory, '{"type": "reset", "data": {"seed": 0}}')
        reset = session.env.reset  # type: ignore[union-attr]

        def recording_reset(**kwargs: Any) -> Any:
            threads.append(threading.get_ident())
            return reset(**kwargs)

        session.env.reset = recording_reset  # type: ignore[union-attr, method-assign]
        reply = json.loads(await _answer(session, factory, '{"type": "reset", "data": {"seed": 1}}') or "")
        assert reply["type"] == "observation"
        return threading.get_ident()

    return asyncio.run(play()), threads[0]


def test_session__a_quick_reset_runs_on_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    loop_thread, reset_thread = _reset_thread(60.0, monkeypatch)
    assert reset_thread == loop_thread


def test_session__a_slow_reset_runs_in_a_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    loop_thread, reset_thread = _reset_thread(0.0, monkeypatch)
    assert reset_thread != loop_thread

"""Sessions of one server process: one env per session, a cap on their number, idle eviction.

A session id is ``"<worker>-<32 hex digits>"``: the index of the worker process that holds the
session, then a random UUID (unguessable, so one client cannot drive another's session).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from ace_gym.errors import AceGymError
from ace_gym.runs.answer_keys import client_info
from ace_gym.server.factory import EnvFactory
from ace_gym.server.protocol import MakeRequest, ProtocolError, ResetRequest, reset_result, step_result
from ace_gym.server.spaces import describe_space

logger = logging.getLogger(__name__)

QUICK_RESET_S = 0.002
"""A reset that took less than this (seconds) is quick: the session's next reset may run on the
event loop, where it blocks the worker's other sessions for about that long at most."""


def worker_of(session_id: str) -> int | None:
    """The worker index a session id names, or None when it names none."""
    prefix, separator, _ = session_id.partition("-")
    return int(prefix) if separator and prefix.isdigit() and len(prefix) < 6 else None


class Session:
    """One client's env and its episode bookkeeping. Calls on one session must not overlap:
    callers hold :attr:`lock` around them (which also keeps a busy session from being evicted)."""

    def __init__(self, session_id: str, env_id: str, transport: str) -> None:
        self.session_id, self.env_id, self.transport = session_id, env_id, transport
        self.env: gym.Env | None = None
        self.make_request = MakeRequest()
        self.last_active = time.monotonic()
        self.step_count = 0
        self.episode_id: str | None = None
        self.in_episode = False
        self.last_reset_s: float | None = None
        self.tools: Any = None
        """The tool schemas the current episode announced (its reset ``info["tools"]``), None before
        the first reset of the session's env (see :mod:`ace_gym.server.mcp`)."""
        self.closed = False
        self.lock = asyncio.Lock()
        self.on_evict: Callable[[], object] | None = None
        """Called when the idle reaper closes the session (a WebSocket closes its connection)."""

    @property
    def resets_quickly(self) -> bool:
        """True when the session's env exists and its last reset was quick (:data:`QUICK_RESET_S`)."""
        return self.env is not None and self.last_reset_s is not None and self.last_reset_s < QUICK_RESET_S

    def touch(self) -> None:
        """Mark the session active now (idle eviction counts from the last touch)."""
        self.last_active = time.monotonic()

    def make(self, factory: EnvFactory, request: MakeRequest) -> dict[str, Any]:
        """Replace the session's env by one built from ``request`` (the old one is closed); the
        session's state."""
        self._build(factory, request)
        return self.state()

    def _build(self, factory: EnvFactory, request: MakeRequest) -> gym.Env:
        env = factory.make(self.env_id, request)
        self.close_env()
        self.env, self.make_request, self.in_episode, self.last_reset_s = env, request, False, None
        self.tools = None
        return env

    def reset(self, factory: EnvFactory, request: ResetRequest) -> dict[str, Any]:
        """``env.reset`` (building the env first if needed); the OpenEnv reset result."""
        env = self.env if self.env is not None else self._build(factory, self.make_request)
        began = time.perf_counter()
        try:
            observation, info = env.reset(seed=request.seed, options=request.options)
        except AceGymError as error:  # the env refused the options (e.g. an unknown instance id)
            raise ProtocolError("VALIDATION_ERROR", f"reset refused: {str(error)[:500]}") from None
        finally:
            self.last_reset_s = time.perf_counter() - began
        self.in_episode = True
        self.tools = info.get("tools", ())
        self.step_count = 0
        self.episode_id = request.episode_id or uuid.uuid4().hex
        return reset_result(observation, client_info(info, self.make_request.channels or ()))

    def step(self, action: Any) -> dict[str, Any]:
        """``env.step(action)``; any action is passed on (the env answers malformed ones with an
        error observation). ProtocolError RESET_NEEDED before the first reset."""
        if not self.in_episode or self.env is None:
            raise ProtocolError("RESET_NEEDED", "call reset before step")
        observation, reward, terminated, truncated, info = self.env.step(action)
        result = step_result(
            observation, reward, terminated, truncated, client_info(info, self.make_request.channels or ())
        )
        self.step_count += 1
        return result

    def state(self) -> dict[str, Any]:
        """OpenEnv's state (``episode_id``, ``step_count``) plus the session's id, env id, make
        arguments and spaces (null before the env is built)."""
        env = self.env
        return {
            "episode_id": self.episode_id,
            "step_count": self.step_count,
            "session_id": self.session_id,
            "env_id": self.env_id,
            "make": self.make_request.model_dump(exclude_none=True),
            "observation_space": describe_space(env.observation_space) if env is not None else None,
            "action_space": describe_space(env.action_space) if env is not None else None,
        }

    def close_env(self) -> None:
        env, self.env = self.env, None
        if env is not None:
            try:
                env.close()
            except Exception:  # closing must free the session whatever the env does
                logger.exception("closing the env of session %s failed", self.session_id)


class SessionStore:
    """The sessions of one worker process, at most ``max_sessions`` of them; a session untouched
    for ``idle_timeout_s`` seconds is evicted by :meth:`evict_idle`."""

    def __init__(self, max_sessions: int, idle_timeout_s: float, worker: int = 0) -> None:
        self.max_sessions, self.idle_timeout_s, self.worker = max_sessions, idle_timeout_s, worker
        self._sessions: dict[str, Session] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def open(self, env_id: str, transport: str) -> Session:
        """A new session (its env is built on first use); ProtocolError CAPACITY_REACHED when full."""
        if len(self._sessions) >= self.max_sessions:
            raise ProtocolError(
                "CAPACITY_REACHED",
                f"this worker holds its maximum of {self.max_sessions} sessions; close one or retry later",
                active_sessions=len(self._sessions),
                max_sessions=self.max_sessions,
            )
        session = Session(f"{self.worker}-{uuid.uuid4().hex}", env_id, transport)
        self._sessions[session.session_id] = session
        return session

    def get(self, session_id: Any, env_id: str) -> Session:
        """The open session ``session_id`` of ``env_id``, touched; ProtocolError UNKNOWN_SESSION."""
        session = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None or session.env_id != env_id:
            raise ProtocolError("UNKNOWN_SESSION", f"no open session {str(session_id)[:80]!r} of {env_id}")
        session.touch()
        return session

    def close(self, session_id: str) -> bool:
        """Close a session and its env; False when it was not open."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            return False
        session.closed = True
        session.close_env()
        return True

    def evict_idle(self) -> list[Session]:
        """Close every session idle for longer than the timeout (a session in the middle of a call
        is not idle); calls their ``on_evict``."""
        deadline = time.monotonic() - self.idle_timeout_s
        idle = [s for s in self._sessions.values() if s.last_active < deadline and not s.lock.locked()]
        for session in idle:
            self.close(session.session_id)
            if session.on_evict is not None:
                session.on_evict()
        return idle

    def close_all(self) -> None:
        for session_id in list(self._sessions):
            self.close(session_id)

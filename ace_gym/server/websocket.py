"""OpenEnv's WebSocket endpoint, ``/ws`` and ``/envs/<env id>/ws``: one connection, one session
(or the open session its ``session_id`` query parameter names); each text (or binary) frame gets
one reply frame (``docs/server.md``).

Served by :class:`WebSocketSessions`, a pure ASGI middleware in front of the app, on uvicorn's own
``receive``/``send``: frames pass no routing, exception-wrapping or ``WebSocket`` layers (they
cost about 13 µs of server CPU per step in ``benchmarks/bench_server.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Receive, Scope, Send

from ace_gym.server.context import ServerContext
from ace_gym.server.factory import EnvFactory
from ace_gym.server.mcp import ToolProbes, mcp_action, mcp_step
from ace_gym.server.protocol import (
    MESSAGE_TYPES,
    MakeRequest,
    ProtocolError,
    ResetRequest,
    decode,
    dumps,
    frame,
    parse_model,
)
from ace_gym.server.sessions import Session

logger = logging.getLogger(__name__)


class WebSocketSessions:
    """Pure ASGI middleware: a WebSocket connection to ``/ws`` or ``/envs/<env id>/ws`` is served
    here (:meth:`serve`); everything else goes to the app."""

    def __init__(self, app: ASGIApp, context: ServerContext) -> None:
        self.app, self.context = app, context
        self._expiring: set[asyncio.Task[None]] = set()  # the loop keeps only weak references to tasks

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            path = scope["path"]
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            attach = query["session_id"][-1] if query.get("session_id") else None
            if path == "/ws":
                return await self.serve(self.context.default_env_id, attach, receive, send)
            prefix, _, env_id = path.removesuffix("/ws").rpartition("/")
            if path.endswith("/ws") and prefix == "/envs" and env_id:
                return await self.serve(env_id, attach, receive, send)
        await self.app(scope, receive, send)

    async def serve(self, env_id: str | None, attach: str | None, receive: Receive, send: Send) -> None:
        """One WebSocket connection, one session: each text (or binary) frame gets one reply frame.
        ``env_id`` None: the root ``/ws`` of a server of several ids, refused with ENV_ID_REQUIRED.
        ``attach``: the ``session_id`` query parameter, an open session (``openenv/session/create``)
        the connection plays instead of a session of its own, as OpenEnv's ``MCPToolClient`` (0.10)
        resets over the WebSocket and calls tools over ``POST /mcp`` in one session; the session
        stays open when the connection closes (its owner closes it)."""
        if (await receive())["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept"})
        context = self.context
        store, factory, probes = context.store, context.factory, context.probes
        try:
            if env_id is None:
                raise context.env_id_required("/ws")
            factory.check_env_id(env_id)
            session = store.get(attach, env_id) if attach is not None else store.open(env_id, "websocket")
        except ProtocolError as error:
            await send({"type": "websocket.send", "text": dumps(error.frame())})
            await send({"type": "websocket.close", "code": 1008})
            return
        session.on_evict = lambda: self._expire_later(send)
        try:
            while True:
                message = await receive()
                if message["type"] == "websocket.disconnect" or session.closed:
                    break
                reply = await _answer(session, factory, probes, message.get("text") or message.get("bytes") or "")
                if reply is None:
                    break
                await send({"type": "websocket.send", "text": reply})
        except (OSError, RuntimeError):  # the client went away mid-exchange (uvicorn's ClientDisconnected)
            pass
        finally:
            if attach is None:
                store.close(session.session_id)
            else:
                session.on_evict = None
            with contextlib.suppress(Exception):
                await send({"type": "websocket.close", "code": 1000})

    def _expire_later(self, send: Send) -> None:
        task = asyncio.ensure_future(_expire(send))
        self._expiring.add(task)
        task.add_done_callback(self._expiring.discard)


async def _answer(session: Session, factory: EnvFactory, probes: ToolProbes, raw: str | bytes) -> str | None:
    """The reply frame (JSON text) to one WebSocket frame; None for ``close``. Never raises for
    what the client sent: errors come back as error frames and the connection stays open."""
    session.touch()
    try:
        message = decode_frame(raw)
        kind = message["type"]
        async with session.lock:
            if kind == "step":
                if "data" not in message:
                    raise ProtocolError("VALIDATION_ERROR", "a step frame carries the action in 'data'")
                action = message["data"]
                if (mcp := mcp_action(action)) is not None:
                    return dumps(frame("observation", await mcp_step(session, probes, action, mcp)))
                return dumps(frame("observation", session.step(action)))
            if kind == "reset":
                request = parse_model(ResetRequest, message.get("data", {}), "reset data")
                if session.resets_quickly:  # on the loop: a thread hop costs more than the reset
                    return dumps(frame("observation", session.reset(factory, request)))
                return dumps(frame("observation", await asyncio.to_thread(session.reset, factory, request)))
            if kind == "state":
                return dumps(frame("state", session.state()))
            if kind == "make":
                request = parse_model(MakeRequest, message.get("data", {}), "make data")
                return dumps(frame("state", await asyncio.to_thread(session.make, factory, request)))
        return None  # close
    except ProtocolError as error:
        return dumps(error.frame())
    except Exception as error:  # a bug in an env or wrapper: report it, keep the connection
        logger.exception("unexpected error in session %s", session.session_id)
        return dumps(ProtocolError("EXECUTION_ERROR", f"{type(error).__name__}: {str(error)[:300]}").frame())


def decode_frame(raw: str | bytes) -> dict[str, Any]:
    """The message of one frame: a JSON object ``{"type": <one of MESSAGE_TYPES>, "data": ...}``
    (``data`` optional); ProtocolError otherwise."""
    message = decode(raw)
    if type(message) is not dict or type(kind := message.get("type")) is not str:
        raise ProtocolError("VALIDATION_ERROR", 'a frame is a JSON object {"type": str, "data": ...}')
    if kind not in MESSAGE_TYPES:
        raise ProtocolError("UNKNOWN_TYPE", f"unknown message type {kind[:50]!r}; known: {', '.join(MESSAGE_TYPES)}")
    if len(message) > 2 or (len(message) == 2 and "data" not in message):
        raise ProtocolError("VALIDATION_ERROR", f"a frame holds 'type' and 'data' only, got {sorted(message)}")
    return message


async def _expire(send: Send) -> None:
    """Tell an idle WebSocket client its session was closed, then close the connection."""
    with contextlib.suppress(Exception):
        text = dumps(ProtocolError("SESSION_EXPIRED", "the session was idle too long").frame())
        await send({"type": "websocket.send", "text": text})
        await send({"type": "websocket.close", "code": 1000})

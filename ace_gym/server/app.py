"""The env server's ASGI app (FastAPI): OpenEnv's HTTP and WebSocket endpoints for every served id.

Each served id has its own OpenEnv base URL, ``/envs/<env id>``, under which live
``POST /reset``, ``POST /step``, ``GET /state``, ``GET /health``, ``GET /schema``,
``GET /metadata``, the WebSocket ``/ws``, and ace-gym's ``POST /make`` and ``POST /close``. The same
endpoints at the root serve the served id when there is only one; on a server of several ids they
answer ENV_ID_REQUIRED (404) naming the ids, so that a client pointed at ``http://host:port`` never
plays an env it did not choose. ``GET /envs`` lists the ids; ``GET /health`` answers at the root too.
The protocol, the session lifecycle and the limits are described in ``docs/server.md``.

HTTP sessions: ``/reset`` (or ``/make``) without a ``session_id`` opens a session and returns its
id; later calls name it. A WebSocket connection is one session. With several worker processes an
HTTP request that reaches a worker other than the session's is forwarded to the session's worker
over that worker's Unix socket (:mod:`ace_gym.server.forwarding`).

This module assembles the app; the routes live by protocol: :mod:`~ace_gym.server.http_routes`
(the HTTP session routes), :mod:`~ace_gym.server.mcp_route` (``POST /mcp``),
:mod:`~ace_gym.server.websocket` (``/ws``), :mod:`~ace_gym.server.info_routes` (health, env ids,
schema, metadata, the play page); what they share is :mod:`~ace_gym.server.context`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.requests import ClientDisconnect

from ace_gym.server import http_routes, info_routes, mcp_route
from ace_gym.server.config import ServerConfig
from ace_gym.server.context import ServerContext, json_response
from ace_gym.server.protocol import ProtocolError
from ace_gym.server.sessions import SessionStore
from ace_gym.server.websocket import WebSocketSessions
from ace_gym.version import __version__

logger = logging.getLogger(__name__)

Endpoint = Callable[[Request], Awaitable[Response]]

ENV_ROUTES: tuple[tuple[str, str, Endpoint], ...] = (
    ("GET", "/health", info_routes.health),
    ("GET", "/schema", info_routes.schema),
    ("GET", "/metadata", info_routes.metadata),
    ("POST", "/make", http_routes.make),
    ("POST", "/reset", http_routes.reset),
    ("POST", "/step", http_routes.step),
    ("GET", "/state", http_routes.state),
    ("POST", "/close", http_routes.close),
    ("POST", "/mcp", mcp_route.mcp),
)
"""The HTTP routes under each env id's base URL ``/envs/<env id>`` and at the root."""


def create_app(config: ServerConfig | None = None) -> FastAPI:
    """The server app for ``config`` (defaults: every ace-gym id, one worker)."""
    context = ServerContext.build(config or ServerConfig())

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        reaper = asyncio.create_task(_reap_idle_sessions(context.store))
        try:
            yield
        finally:
            reaper.cancel()
            context.store.close_all()
            if context.forwarder is not None:
                await context.forwarder.aclose()

    app = FastAPI(
        title="ace-gym env server",
        version=__version__,
        description="ACE grid-planning environments over the OpenEnv protocol (see docs/server.md).",
        lifespan=lifespan,
    )
    app.state.context = context
    app.state.store = context.store  # the open sessions, as tests and tools count them
    # Starlette types a handler as taking any Exception; each of these takes the one it is added for
    app.add_exception_handler(ProtocolError, _protocol_error)  # type: ignore[arg-type]
    app.add_exception_handler(ClientDisconnect, _client_gone)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _server_error)
    app.add_middleware(WebSocketSessions, context=context)
    app.add_api_route("/envs", info_routes.list_envs, methods=["GET"])
    if context.config.ui:
        app.add_api_route("/ui", info_routes.play_page, methods=["GET"])
    for prefix in ("", "/envs/{env_id}"):
        for method, path, endpoint in ENV_ROUTES:
            app.add_api_route(f"{prefix}{path}", endpoint, methods=[method])
    return app


async def _protocol_error(request: Request, error: ProtocolError) -> Response:
    return json_response(error.http_body(), error.status)


async def _client_gone(request: Request, error: ClientDisconnect) -> Response:
    """A request whose body never arrived whole (the client left, or was too slow for the
    request timeout): one log line, no traceback; the answer reaches nobody."""
    client = request.client
    peer = f"{client.host}:{client.port}" if client else "a client"
    what = f"{request.method} {request.url.path}"
    logger.info("%s: connection closed before its %s request arrived whole (disconnected or timed out)", peer, what)
    return Response(status_code=400)


async def _server_error(request: Request, error: Exception) -> Response:
    logger.exception("unexpected error serving %s", request.url.path)
    failure = ProtocolError("EXECUTION_ERROR", f"{type(error).__name__}: {str(error)[:300]}")
    return json_response(failure.http_body(), failure.status)


async def _reap_idle_sessions(store: SessionStore) -> None:
    """Close the sessions idle longer than the store's timeout, checking a few times per timeout."""
    interval = min(max(store.idle_timeout_s / 4, 0.05), 5.0)
    while True:
        await asyncio.sleep(interval)
        evicted = store.evict_idle()
        if evicted:
            logger.info("closed %d idle sessions", len(evicted))

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
over that worker's Unix socket (:class:`Forwarder`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import gymnasium as gym
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

import ace_gym
from ace_gym.errors import integer, number
from ace_gym.server.factory import EnvFactory
from ace_gym.server.mcp import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    SERVER_ERROR,
    ToolProbes,
    call_tool_step,
    jsonrpc_error,
    jsonrpc_request,
    jsonrpc_result,
    list_tools,
    list_tools_result,
    mcp_action,
    mcp_step,
    mcp_tools_as_jsonrpc,
)
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
from ace_gym.server.sessions import Session, SessionStore, worker_of
from ace_gym.server.spaces import space_schema

logger = logging.getLogger(__name__)

FORWARDED_HEADER = "x-ace-gym-forwarded"
"""Set on a request one worker forwards to another: the receiver serves it, never forwards it."""
_STEP_FIELDS = frozenset({"action", "session_id", "timeout_s", "request_id"})  # OpenEnv's StepRequest fields


@dataclass(frozen=True)
class ServerConfig:
    """Settings of one server process.

    ``env_ids``: the served ids (empty: every ace-gym id); ``data_dirs``: folders whose dataset
    files clients may name; ``max_sessions``: open sessions per worker process;
    ``idle_timeout_s``: a session untouched this long is closed; ``max_body_bytes``: the largest
    HTTP body or WebSocket frame; ``max_header_bytes`` / ``max_headers``: the largest HTTP request
    head and its most headers (431 beyond); ``request_timeout_s``: a request must arrive whole
    within this many seconds (see :mod:`ace_gym.server.http_protocol`); ``worker`` / ``workers`` / ``runtime_dir``: this process's index,
    the number of worker processes and the folder of their Unix sockets, set by
    :func:`ace_gym.server.runner.serve` (without a folder, requests are never forwarded);
    ``ui``: serve the play page at ``GET /ui`` (:data:`PLAY_PAGE`).
    """

    env_ids: tuple[str, ...] = ()
    data_dirs: tuple[str, ...] = ()
    max_sessions: int = 1024
    idle_timeout_s: float = 600.0
    max_body_bytes: int = 1 << 20
    max_header_bytes: int = 64 << 10
    max_headers: int = 100
    request_timeout_s: float = 30.0
    worker: int = 0
    workers: int = 1
    runtime_dir: str | None = None
    ui: bool = False

    def __post_init__(self) -> None:
        set_field = object.__setattr__
        set_field(self, "max_sessions", integer("max_sessions", self.max_sessions, minimum=1))
        set_field(self, "idle_timeout_s", number("idle_timeout_s", self.idle_timeout_s, above=0, note="(seconds)"))
        set_field(self, "max_body_bytes", integer("max_body_bytes", self.max_body_bytes, minimum=1024))
        set_field(self, "max_header_bytes", integer("max_header_bytes", self.max_header_bytes, minimum=1024))
        set_field(self, "max_headers", integer("max_headers", self.max_headers, minimum=8))
        set_field(
            self, "request_timeout_s", number("request_timeout_s", self.request_timeout_s, above=0, note="(seconds)")
        )
        set_field(self, "workers", integer("workers", self.workers, minimum=1))
        set_field(self, "worker", integer("worker", self.worker, minimum=0, maximum=self.workers - 1))


PLAY_PAGE = resources.files("ace_gym.server") / "ui" / "play.html"
"""The play page ``--ui`` serves: a person plays an env through the same HTTP session routes clients use."""


def worker_socket(runtime_dir: str | Path, worker: int) -> Path:
    """The Unix socket on which worker ``worker`` takes forwarded requests."""
    return Path(runtime_dir) / f"worker-{worker}.sock"


def json_response(payload: Any, status: int = 200) -> Response:
    return Response(dumps(payload), status_code=status, media_type="application/json")


class Forwarder:
    """Sends an HTTP request to the worker that holds its session, over that worker's Unix socket."""

    def __init__(self, runtime_dir: str) -> None:
        self.runtime_dir = runtime_dir
        self._clients: dict[int, Any] = {}

    async def forward(self, worker: int, request: Request, body: bytes) -> Response:
        import httpx  # only multi-worker servers forward

        client = self._clients.get(worker)
        if client is None:
            transport = httpx.AsyncHTTPTransport(uds=str(worker_socket(self.runtime_dir, worker)))
            client = self._clients[worker] = httpx.AsyncClient(transport=transport, base_url="http://worker")
        try:
            reply = await client.request(
                request.method,
                request.url.path,
                params=request.query_params,
                content=body,
                headers={"content-type": "application/json", FORWARDED_HEADER: "1"},
            )
        except httpx.TransportError:
            raise ProtocolError("UNKNOWN_SESSION", f"the worker holding this session ({worker}) is gone") from None
        return Response(reply.content, status_code=reply.status_code, media_type="application/json")

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()


def create_app(config: ServerConfig | None = None) -> FastAPI:
    """The server app for ``config`` (defaults: every ace-gym id, one worker)."""
    config = config or ServerConfig()
    factory = EnvFactory(config.env_ids, config.data_dirs)
    probes = ToolProbes(factory)  # list_tools before a reset: one probe per stack, a bounded number at once
    store = SessionStore(config.max_sessions, config.idle_timeout_s, config.worker)
    forwarder = Forwarder(config.runtime_dir) if config.workers > 1 and config.runtime_dir else None
    default_env_id = factory.env_ids[0] if len(factory.env_ids) == 1 else None  # what the root endpoints serve
    schemas: dict[str, dict[str, Any]] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        reaper = asyncio.create_task(_reap_idle_sessions(store))
        try:
            yield
        finally:
            reaper.cancel()
            store.close_all()
            if forwarder is not None:
                await forwarder.aclose()

    app = FastAPI(
        title="ace-gym env server",
        version=ace_gym.__version__,
        description="ACE grid-planning environments over the OpenEnv protocol (see docs/server.md).",
        lifespan=lifespan,
    )
    app.state.store, app.state.factory, app.state.config = store, factory, config

    @app.exception_handler(ProtocolError)
    async def protocol_error(request: Request, error: ProtocolError) -> Response:
        return json_response(error.http_body(), error.status)

    @app.exception_handler(ClientDisconnect)
    async def client_gone(request: Request, error: ClientDisconnect) -> Response:
        """A request whose body never arrived whole (the client left, or was too slow for the
        request timeout): one log line, no traceback; the answer reaches nobody."""
        client = request.client
        peer = f"{client.host}:{client.port}" if client else "a client"
        what = f"{request.method} {request.url.path}"
        logger.info("%s: connection closed before its %s request arrived whole (disconnected or timed out)", peer, what)
        return Response(status_code=400)

    @app.exception_handler(Exception)
    async def server_error(request: Request, error: Exception) -> Response:
        logger.exception("unexpected error serving %s", request.url.path)
        failure = ProtocolError("EXECUTION_ERROR", f"{type(error).__name__}: {str(error)[:300]}")
        return json_response(failure.http_body(), failure.status)

    def env_id_of(request: Request) -> str:
        env_id = request.path_params.get("env_id", default_env_id)
        if env_id is None:
            raise env_id_required(request.url.path)
        factory.check_env_id(env_id)
        return str(env_id)

    def env_id_required(path: str) -> ProtocolError:
        """The answer of a root endpoint on a server of several ids: name the id in the URL."""
        ids = factory.env_ids
        shown = ", ".join(ids[:5]) + (f", ... ({len(ids)} in all; GET /envs lists them)" if len(ids) > 5 else "")
        return ProtocolError(
            "ENV_ID_REQUIRED",
            f"this server serves several env ids; name one in the URL: /envs/<env id>{path} ({shown})",
            env_ids=list(ids),
        )

    async def read_json(request: Request, *, empty: Any = None) -> tuple[bytes, Any]:
        """The body (at most ``max_body_bytes``) and its JSON value; ``empty`` for an empty body."""
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > config.max_body_bytes:
            raise ProtocolError("PAYLOAD_TOO_LARGE", f"the body exceeds {config.max_body_bytes} bytes")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > config.max_body_bytes:
                raise ProtocolError("PAYLOAD_TOO_LARGE", f"the body exceeds {config.max_body_bytes} bytes")
        if not body and empty is not None:
            return b"", empty
        value = decode(bytes(body))
        if not isinstance(value, dict):
            raise ProtocolError("VALIDATION_ERROR", f"the body must be a JSON object, got {type(value).__name__}")
        return bytes(body), value

    def elsewhere(request: Request, session_id: Any) -> int | None:
        """The worker to forward to when ``session_id`` lives in another worker process."""
        if forwarder is None or not isinstance(session_id, str) or FORWARDED_HEADER in request.headers:
            return None
        worker = worker_of(session_id)
        return worker if worker is not None and worker != config.worker and worker < config.workers else None

    async def health(request: Request) -> Response:
        return json_response(
            {
                "status": "healthy",
                "worker": config.worker,
                "pid": os.getpid(),
                "workers": config.workers,
                "sessions": len(store),
                "max_sessions": config.max_sessions,
            }
        )

    async def list_envs(request: Request) -> Response:
        return json_response({"env_ids": list(factory.env_ids), "default": default_env_id})

    async def schema(request: Request) -> Response:
        env_id = env_id_of(request)
        if env_id not in schemas:
            probe = gym.make(env_id, disable_env_checker=True)
            schemas[env_id] = _schemas(probe)
            probe.close()
        return json_response(schemas[env_id])

    async def metadata(request: Request) -> Response:
        env_id = env_id_of(request)
        entry_point = gym.spec(env_id).entry_point
        return json_response(
            {
                "name": env_id,
                "description": f"ace-gym {env_id} ({entry_point}): ACE grid planning for tool-using LLM agents",
                "version": ace_gym.__version__,
                "readme_content": None,
                "author": None,
                "documentation_url": None,
            }
        )

    async def opening_call(
        request: Request, model: type[BaseModel], call: Callable[[Session, Any], dict[str, Any]]
    ) -> Response:
        """``make`` and ``reset``: on the named session, else on a new one that does not outlive
        the call's failure; the answer carries the session id."""
        env_id = env_id_of(request)
        raw, body = await read_json(request, empty={})
        session_id = body.pop("session_id", None)
        if (worker := elsewhere(request, session_id)) is not None:
            return await forwarder.forward(worker, request, raw)  # type: ignore[union-attr]
        arguments = parse_model(model, body, f"{request.url.path.rsplit('/', 1)[-1]} request")
        session = store.get(session_id, env_id) if session_id is not None else store.open(env_id, "http")
        try:
            async with session.lock:
                result = await asyncio.to_thread(call, session, arguments)
        except BaseException:
            if session_id is None:
                store.close(session.session_id)
            raise
        return json_response({**result, "session_id": session.session_id})

    async def make(request: Request) -> Response:
        return await opening_call(request, MakeRequest, lambda session, arguments: session.make(factory, arguments))

    async def reset(request: Request) -> Response:
        return await opening_call(request, ResetRequest, lambda session, arguments: session.reset(factory, arguments))

    def session_endpoint(
        call: Callable[[Session, dict[str, Any]], dict[str, Any]],
        *,
        check: Callable[[dict[str, Any]], None] | None = None,
        in_query: bool = False,
    ) -> Callable[[Request], Awaitable[Response]]:
        """An endpoint for an open session named by the body's (or the query's) ``session_id``:
        forwarded to the session's worker, else ``call(session, body)`` under the session's lock.
        ``check`` validates the body first."""

        async def endpoint(request: Request) -> Response:
            env_id = env_id_of(request)
            raw, body = (b"", dict(request.query_params)) if in_query else await read_json(request)
            session_id = body.get("session_id")
            if (worker := elsewhere(request, session_id)) is not None:
                return await forwarder.forward(worker, request, raw)  # type: ignore[union-attr]
            if check is not None:
                check(body)
            session = store.get(session_id, env_id)
            async with session.lock:
                return json_response({**call(session, body), "session_id": session.session_id})

        return endpoint

    def check_step(body: dict[str, Any]) -> None:
        if "action" not in body or not body.keys() <= _STEP_FIELDS:
            raise ProtocolError("VALIDATION_ERROR", f"a step body is {{'action', 'session_id'}}, got {sorted(body)}")

    async def step(request: Request) -> Response:
        """OpenEnv's step on the named session; an MCP tool action (``list_tools``, ``call_tool``:
        :mod:`ace_gym.server.mcp`) is answered as OpenEnv's MCP environments answer it. Without a
        ``session_id``, ``list_tools`` answers the tools of a fresh env of the id (OpenEnv's
        stateless ``/step``); any other action needs a session (UNKNOWN_SESSION)."""
        env_id = env_id_of(request)
        raw, body = await read_json(request)
        session_id = body.get("session_id")
        if (worker := elsewhere(request, session_id)) is not None:
            return await forwarder.forward(worker, request, raw)  # type: ignore[union-attr]
        check_step(body)
        action = body["action"]
        kind = mcp_action(action)
        if kind == "list_tools" and session_id is None:
            tools = await probes.tools(env_id, MakeRequest())
            return json_response(list_tools_result(tools))
        session = store.get(session_id, env_id)
        async with session.lock:
            result = session.step(action) if kind is None else await mcp_step(session, probes, action, kind)
        return json_response({**result, "session_id": session.session_id})

    async def mcp(request: Request) -> Response:
        """OpenEnv's ``POST /mcp``: JSON-RPC 2.0 ``tools/list``, ``tools/call`` (on the HTTP session
        ``params.session_id``) and ``openenv/session/create`` / ``close``. Every answer is a JSON-RPC
        response (status 200), errors included, except a body over ``--max-body-bytes`` (413)."""
        request_id = None
        try:
            env_id = env_id_of(request)
            raw, body = await read_json(request, empty={})
            method, params, request_id = jsonrpc_request(body)
            session_id = params.get("session_id")
            if (worker := elsewhere(request, session_id)) is not None:
                return await forwarder.forward(worker, request, raw)  # type: ignore[union-attr]
            if method == "tools/list":
                if session_id is None:
                    tools = await probes.tools(env_id, MakeRequest())
                else:
                    session = store.get(session_id, env_id)
                    async with session.lock:
                        tools = await list_tools(session, probes)
                return json_response(jsonrpc_result({"tools": mcp_tools_as_jsonrpc(tools)}, request_id))
            if method == "tools/call":
                name, arguments = params.get("name"), params.get("arguments", {})
                if session_id is None:  # a wrong or missing name is the env's to answer, as on /step
                    message = "tools/call needs params 'session_id' (openenv/session/create or POST /reset opens one)"
                    return json_response(jsonrpc_error(INVALID_PARAMS, message, request_id))
                session = store.get(session_id, env_id)
                async with session.lock:
                    answer = call_tool_step(session, {"tool_name": name, "arguments": arguments})
                meta = {"reward": answer["reward"], "done": answer["done"], **answer["observation"]["metadata"]}
                return json_response(jsonrpc_result({**answer["observation"]["result"], "meta": meta}, request_id))
            if method == "openenv/session/create":
                reset_request = parse_model(
                    ResetRequest, {k: v for k, v in params.items() if k != "session_id"}, "params"
                )
                session = store.open(env_id, "http")
                try:
                    async with session.lock:
                        await asyncio.to_thread(session.reset, factory, reset_request)
                except BaseException:
                    store.close(session.session_id)
                    raise
                return json_response(jsonrpc_result({"session_id": session.session_id}, request_id))
            if method == "openenv/session/close":
                closing = store.get(session_id, env_id).session_id
                result = {"session_id": closing, "closed": store.close(closing)}
                return json_response(jsonrpc_result(result, request_id))
            return json_response(jsonrpc_error(METHOD_NOT_FOUND, f"Method not found: {method[:100]}", request_id))
        except ProtocolError as error:
            if error.code == "PAYLOAD_TOO_LARGE":
                raise
            code = {"INVALID_JSON": PARSE_ERROR, "VALIDATION_ERROR": INVALID_REQUEST}.get(error.code, SERVER_ERROR)
            answer = jsonrpc_error(code, error.message, request_id)
            answer["error"]["data"] = {"code": error.code, **error.details}
            return json_response(answer)

    state = session_endpoint(lambda session, _: session.state(), in_query=True)
    close = session_endpoint(lambda session, _: {"closed": store.close(session.session_id)})

    expiring: set[asyncio.Task[None]] = set()  # the loop keeps only weak references to tasks

    def expire_later(send: Send) -> None:
        task = asyncio.ensure_future(_expire(send))
        expiring.add(task)
        task.add_done_callback(expiring.discard)

    async def websocket_session(env_id: str | None, attach: str | None, receive: Receive, send: Send) -> None:
        """One WebSocket connection, one session: each text (or binary) frame gets one reply frame.
        ``env_id`` None: the root ``/ws`` of a server of several ids, refused with ENV_ID_REQUIRED.
        ``attach``: the ``session_id`` query parameter, an open session (``openenv/session/create``)
        the connection plays instead of a session of its own, as OpenEnv's ``MCPToolClient`` (0.10)
        resets over the WebSocket and calls tools over ``POST /mcp`` in one session; the session
        stays open when the connection closes (its owner closes it)."""
        if (await receive())["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept"})
        try:
            if env_id is None:
                raise env_id_required("/ws")
            factory.check_env_id(env_id)
            session = store.get(attach, env_id) if attach is not None else store.open(env_id, "websocket")
        except ProtocolError as error:
            await send({"type": "websocket.send", "text": dumps(error.frame())})
            await send({"type": "websocket.close", "code": 1008})
            return
        session.on_evict = lambda: expire_later(send)
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

    app.add_middleware(_WebSocketSessions, serve=websocket_session, default_env_id=default_env_id)
    app.add_api_route("/envs", list_envs, methods=["GET"])
    if config.ui:
        page = PLAY_PAGE.read_text(encoding="utf-8")

        async def play_page(request: Request) -> Response:
            return HTMLResponse(page)

        app.add_api_route("/ui", play_page, methods=["GET"])
    for prefix in ("", "/envs/{env_id}"):
        app.add_api_route(f"{prefix}/health", health, methods=["GET"])
        app.add_api_route(f"{prefix}/schema", schema, methods=["GET"])
        app.add_api_route(f"{prefix}/metadata", metadata, methods=["GET"])
        app.add_api_route(f"{prefix}/make", make, methods=["POST"])
        app.add_api_route(f"{prefix}/reset", reset, methods=["POST"])
        app.add_api_route(f"{prefix}/step", step, methods=["POST"])
        app.add_api_route(f"{prefix}/state", state, methods=["GET"])
        app.add_api_route(f"{prefix}/close", close, methods=["POST"])
        app.add_api_route(f"{prefix}/mcp", mcp, methods=["POST"])
    return app


async def _answer(session: Session, factory: EnvFactory, probes: ToolProbes, raw: str | bytes) -> str | None:
    """The reply frame (JSON text) to one WebSocket frame; None for ``close``. Never raises for
    what the client sent: errors come back as error frames and the connection stays open."""
    session.touch()
    try:
        message = decode(raw)
        if type(message) is not dict or type(kind := message.get("type")) is not str:
            raise ProtocolError("VALIDATION_ERROR", 'a frame is a JSON object {"type": str, "data": ...}')
        if kind not in MESSAGE_TYPES:
            raise ProtocolError(
                "UNKNOWN_TYPE", f"unknown message type {kind[:50]!r}; known: {', '.join(MESSAGE_TYPES)}"
            )
        if len(message) > 2 or (len(message) == 2 and "data" not in message):
            raise ProtocolError("VALIDATION_ERROR", f"a frame holds 'type' and 'data' only, got {sorted(message)}")
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


class _WebSocketSessions:
    """Pure ASGI middleware: a WebSocket connection to ``/ws`` or ``/envs/<env id>/ws`` is served
    by ``serve(env_id, receive, send)`` on uvicorn's own ``receive``/``send``; everything else
    goes to the app. Frames then pass no routing, exception-wrapping or ``WebSocket`` layers (they
    cost about 13 µs of server CPU per step in ``benchmarks/bench_server.py``)."""

    def __init__(
        self,
        app: ASGIApp,
        serve: Callable[[str | None, str | None, Receive, Send], Awaitable[None]],
        default_env_id: str | None,
    ) -> None:
        self.app, self.serve, self.default_env_id = app, serve, default_env_id

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            path = scope["path"]
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            attach = query["session_id"][-1] if query.get("session_id") else None
            if path == "/ws":
                return await self.serve(self.default_env_id, attach, receive, send)
            prefix, _, env_id = path.removesuffix("/ws").rpartition("/")
            if path.endswith("/ws") and prefix == "/envs" and env_id:
                return await self.serve(env_id, attach, receive, send)
        await self.app(scope, receive, send)


async def _expire(send: Send) -> None:
    """Tell an idle WebSocket client its session was closed, then close the connection."""
    with contextlib.suppress(Exception):
        text = dumps(ProtocolError("SESSION_EXPIRED", "the session was idle too long").frame())
        await send({"type": "websocket.send", "text": text})
        await send({"type": "websocket.close", "code": 1000})


async def _reap_idle_sessions(store: SessionStore) -> None:
    interval = min(max(store.idle_timeout_s / 4, 0.05), 5.0)
    while True:
        await asyncio.sleep(interval)
        evicted = store.evict_idle()
        if evicted:
            logger.info("closed %d idle sessions", len(evicted))


def _schemas(env: gym.Env) -> dict[str, Any]:
    """OpenEnv's ``/schema``: JSON schemas of the action, the observation object and the state."""
    observation = {
        "type": "object",
        "properties": {
            "value": space_schema(env.observation_space),
            "info": {"type": "object"},
            "terminated": {"type": "boolean"},
            "truncated": {"type": "boolean"},
        },
        "required": ["value", "info", "terminated", "truncated"],
    }
    state = {
        "type": "object",
        "properties": {
            "episode_id": {"type": ["string", "null"]},
            "step_count": {"type": "integer", "minimum": 0},
            "session_id": {"type": "string"},
            "env_id": {"type": "string"},
            "make": {"type": "object"},
            "observation_space": {"type": ["object", "null"]},
            "action_space": {"type": ["object", "null"]},
        },
    }
    return {"action": space_schema(env.action_space), "observation": observation, "state": state}

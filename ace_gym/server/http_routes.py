"""OpenEnv's HTTP session routes: ``POST /reset`` and ace-gym's ``POST /make`` (on the named
session, else on a new one whose id the answer carries), ``POST /step``, ``GET /state`` and
``POST /close`` on an open session named by ``session_id``. A request for a session of another
worker process is forwarded to it (:mod:`ace_gym.server.forwarding`); each call runs under the
session's lock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from pydantic import BaseModel

from ace_gym.server.context import ServerContext, context_of, json_response
from ace_gym.server.factory import EnvFactory
from ace_gym.server.mcp import list_tools_result, mcp_action, mcp_step
from ace_gym.server.protocol import MakeRequest, ProtocolError, ResetRequest, parse_model
from ace_gym.server.sessions import Session

STEP_FIELDS = frozenset({"action", "session_id", "timeout_s", "request_id"})
"""The fields of a step body (OpenEnv's ``StepRequest``)."""


async def make(request: Request) -> Response:
    """Build the session's env for a stack (:class:`~ace_gym.server.protocol.MakeRequest`)."""
    return await _opening_call(request, MakeRequest, Session.make)


async def reset(request: Request) -> Response:
    """OpenEnv's reset (:class:`~ace_gym.server.protocol.ResetRequest`)."""
    return await _opening_call(request, ResetRequest, Session.reset)


async def step(request: Request) -> Response:
    """OpenEnv's step on the named session; an MCP tool action (``list_tools``, ``call_tool``:
    :mod:`ace_gym.server.mcp`) is answered as OpenEnv's MCP environments answer it. Without a
    ``session_id``, ``list_tools`` answers the tools of a fresh env of the id (OpenEnv's
    stateless ``/step``); any other action needs a session (UNKNOWN_SESSION)."""
    context = context_of(request)
    env_id = context.env_id_of(request)
    raw, body = await context.read_json(request)
    session_id = body.get("session_id")
    if (answer := await context.forwarded(request, session_id, raw)) is not None:
        return answer
    if "action" not in body or not body.keys() <= STEP_FIELDS:
        raise ProtocolError("VALIDATION_ERROR", f"a step body is {{'action', 'session_id'}}, got {sorted(body)}")
    action = body["action"]
    kind = mcp_action(action)
    if kind == "list_tools" and session_id is None:
        tools = await context.probes.tools(env_id, MakeRequest())
        return json_response(list_tools_result(tools))
    session = context.store.get(session_id, env_id)
    async with session.lock:
        result = session.step(action) if kind is None else await mcp_step(session, context.probes, action, kind)
    return json_response({**result, "session_id": session.session_id})


async def state(request: Request) -> Response:
    """OpenEnv's state of the session the query's ``session_id`` names."""
    return await _on_open_session(request, lambda context, session: session.state(), in_query=True)


async def close(request: Request) -> Response:
    """Close the named session (``closed``: whether it was open)."""
    return await _on_open_session(request, lambda context, session: {"closed": context.store.close(session.session_id)})


async def _opening_call(
    request: Request,
    model: type[BaseModel],
    call: Callable[[Session, EnvFactory, Any], dict[str, Any]],
) -> Response:
    """``make`` and ``reset``: ``call(session, factory, request)`` (in a thread) with the body
    parsed as ``model``, on the named session, else on a new one that does not outlive the
    call's failure; the answer carries the session id."""
    context = context_of(request)
    env_id = context.env_id_of(request)
    raw, body = await context.read_json(request, empty={})
    session_id = body.pop("session_id", None)
    if (answer := await context.forwarded(request, session_id, raw)) is not None:
        return answer
    arguments = parse_model(model, body, f"{request.url.path.rsplit('/', 1)[-1]} request")
    store = context.store
    session = store.get(session_id, env_id) if session_id is not None else store.open(env_id, "http")
    try:
        async with session.lock:
            result = await asyncio.to_thread(call, session, context.factory, arguments)
    except BaseException:
        if session_id is None:
            store.close(session.session_id)
        raise
    return json_response({**result, "session_id": session.session_id})


async def _on_open_session(
    request: Request,
    call: Callable[[ServerContext, Session], dict[str, Any]],
    *,
    in_query: bool = False,
) -> Response:
    """``call`` on the open session named by the body's (or, ``in_query``, the query's)
    ``session_id``, under the session's lock; the answer carries the session id."""
    context = context_of(request)
    env_id = context.env_id_of(request)
    raw, body = (b"", dict(request.query_params)) if in_query else await context.read_json(request)
    session_id = body.get("session_id")
    if (answer := await context.forwarded(request, session_id, raw)) is not None:
        return answer
    session = context.store.get(session_id, env_id)
    async with session.lock:
        return json_response({**call(context, session), "session_id": session.session_id})

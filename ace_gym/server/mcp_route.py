"""OpenEnv's ``POST /mcp``: JSON-RPC 2.0 ``tools/list``, ``tools/call`` (on the HTTP session
``params.session_id``) and ``openenv/session/create`` / ``close``, one small function per method.
Every answer is a JSON-RPC response (status 200), errors included, except a body over
``--max-body-bytes`` (413). The tool actions themselves are :mod:`ace_gym.server.mcp`'s."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from ace_gym.server.context import ServerContext, context_of, json_response
from ace_gym.server.mcp import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    SERVER_ERROR,
    call_tool_step,
    jsonrpc_error,
    jsonrpc_request,
    jsonrpc_result,
    list_tools,
    mcp_tools_as_jsonrpc,
)
from ace_gym.server.protocol import MakeRequest, ProtocolError, ResetRequest, parse_model

Method = Callable[[ServerContext, str, dict[str, Any], Any], Awaitable[dict[str, Any]]]
"""A JSON-RPC method: ``(context, env_id, params, request_id)`` -> the JSON-RPC response."""


async def mcp(request: Request) -> Response:
    """The JSON-RPC response to one request (see the module docstring)."""
    context = context_of(request)
    request_id = None
    try:
        env_id = context.env_id_of(request)
        raw, body = await context.read_json(request, empty={})
        method, params, request_id = jsonrpc_request(body)
        if (answer := await context.forwarded(request, params.get("session_id"), raw)) is not None:
            return answer
        run = METHODS.get(method)
        if run is None:
            return json_response(jsonrpc_error(METHOD_NOT_FOUND, f"Method not found: {method[:100]}", request_id))
        return json_response(await run(context, env_id, params, request_id))
    except ProtocolError as error:
        if error.code == "PAYLOAD_TOO_LARGE":
            raise
        code = {"INVALID_JSON": PARSE_ERROR, "VALIDATION_ERROR": INVALID_REQUEST}.get(error.code, SERVER_ERROR)
        failed = jsonrpc_error(code, error.message, request_id)
        failed["error"]["data"] = {"code": error.code, **error.details}
        return json_response(failed)


async def tools_list(context: ServerContext, env_id: str, params: dict[str, Any], request_id: Any) -> dict[str, Any]:
    """The tools of the session's episode; without a session, those a fresh env of the id announces."""
    session_id = params.get("session_id")
    if session_id is None:
        tools = await context.probes.tools(env_id, MakeRequest())
    else:
        session = context.store.get(session_id, env_id)
        async with session.lock:
            tools = await list_tools(session, context.probes)
    return jsonrpc_result({"tools": mcp_tools_as_jsonrpc(tools)}, request_id)


async def tools_call(context: ServerContext, env_id: str, params: dict[str, Any], request_id: Any) -> dict[str, Any]:
    """A tool call stepped on the session; a wrong or missing tool name is the env's to answer, as on ``/step``."""
    session_id, name, arguments = params.get("session_id"), params.get("name"), params.get("arguments", {})
    if session_id is None:
        message = "tools/call needs params 'session_id' (openenv/session/create or POST /reset opens one)"
        return jsonrpc_error(INVALID_PARAMS, message, request_id)
    session = context.store.get(session_id, env_id)
    async with session.lock:
        answer = call_tool_step(session, {"tool_name": name, "arguments": arguments})
    meta = {"reward": answer["reward"], "done": answer["done"], **answer["observation"]["metadata"]}
    return jsonrpc_result({**answer["observation"]["result"], "meta": meta}, request_id)


async def session_create(
    context: ServerContext, env_id: str, params: dict[str, Any], request_id: Any
) -> dict[str, Any]:
    """A new HTTP session, reset with ``params`` (a reset request); a failed reset closes it."""
    reset_request = parse_model(ResetRequest, {k: v for k, v in params.items() if k != "session_id"}, "params")
    session = context.store.open(env_id, "http")
    try:
        async with session.lock:
            await asyncio.to_thread(session.reset, context.factory, reset_request)
    except BaseException:
        context.store.close(session.session_id)
        raise
    return jsonrpc_result({"session_id": session.session_id}, request_id)


async def session_close(context: ServerContext, env_id: str, params: dict[str, Any], request_id: Any) -> dict[str, Any]:
    """Close the named session."""
    closing = context.store.get(params.get("session_id"), env_id).session_id
    return jsonrpc_result({"session_id": closing, "closed": context.store.close(closing)}, request_id)


METHODS: dict[str, Method] = {
    "tools/list": tools_list,
    "tools/call": tools_call,
    "openenv/session/create": session_create,
    "openenv/session/close": session_close,
}
"""The JSON-RPC methods ``POST /mcp`` answers."""

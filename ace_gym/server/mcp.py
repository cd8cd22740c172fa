"""OpenEnv's MCP tool actions on ace-gym sessions: ``list_tools`` and ``call_tool``.

openenv-core's ``MCPToolClient`` sends them as step actions (``{"type": "list_tools"}``,
``{"type": "call_tool", "tool_name": ..., "arguments": {...}}``) over the session's WebSocket, or
as JSON-RPC ``tools/list`` / ``tools/call`` on ``POST /mcp``. The answers have the shapes of
openenv-core's ``ListToolsObservation`` and ``CallToolObservation`` as its server serializes them:

* ``list_tools``: ``{"observation": {"tools": [{"name", "description", "input_schema"}]}, "reward":
  null, "done": false}``, the tools the session's episode announced (its reset ``info["tools"]``,
  the env's own OpenAI tool schemas, ``parameters`` as ``input_schema``); before the session's
  first reset, the tools a reset of the same stack announces (a throwaway env, reset with seed 0,
  once per stack: :class:`ToolProbes`);
* ``call_tool``: the local step ``env.step({"name": tool_name, "arguments": arguments})``, its
  observation as a FastMCP ``CallToolResult`` (``data``: the observation itself, ``content``: it
  as text, ``is_error``: the step's ``info["ok"]`` is False), its reward and done, and its info,
  terminated and truncated under ``metadata``. A malformed call (no tool name, arguments that are
  not an object, an unknown tool) is stepped as it is: the env answers it with its error
  observation, as the local env does, never with a protocol error.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from ace_gym.server.factory import EnvFactory
from ace_gym.server.protocol import MakeRequest, ProtocolError
from ace_gym.server.sessions import Session

MCP_ACTIONS = frozenset({"list_tools", "call_tool"})
"""The ``type`` of a step action that is an MCP tool action (openenv-core's ``_MCP_ACTION_TYPES``)."""


def mcp_action(action: Any) -> str | None:
    """The MCP action type of a step action (``"list_tools"`` or ``"call_tool"``), else None."""
    if type(action) is dict:
        kind = action.get("type")
        if type(kind) is str and kind in MCP_ACTIONS:  # any JSON may come: a list is unhashable
            return kind
    return None


def mcp_tools(schemas: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI tool schemas (``{"type": "function", "function": {"name", "description",
    "parameters"}}``) as MCP tools ``{"name", "description", "input_schema"}``, in their order."""
    tools = []
    for schema in schemas:
        function = schema.get("function", schema)
        tools.append(
            {
                "name": function["name"],
                "description": function.get("description", ""),
                "input_schema": function.get("parameters", {"type": "object", "properties": {}}),
            }
        )
    return tools


def probe_tools(factory: EnvFactory, env_id: str, request: MakeRequest) -> list[dict[str, Any]]:
    """The tools a reset of the stack ``request`` of ``env_id`` announces, from a throwaway env
    (reset with seed 0, then closed): what ``list_tools`` answers before a session's first reset.
    It builds an env (a procedural one in tens of milliseconds): call it off the event loop."""
    env = factory.make(env_id, request)
    try:
        _, info = env.reset(seed=0)
    finally:
        env.close()
    return mcp_tools(info.get("tools", ()))


class ToolProbes:
    """What ``list_tools`` answers before a session's first reset, per env id and stack: probed
    once (:func:`probe_tools`, in a thread) and then answered from memory, since a reset with
    seed 0 of one stack always announces the same tools. Asks for a stack being probed wait for
    that probe; at most ``max_concurrent`` probes run at once (one builds and resets an env: up to
    a second of CPU on a procedural id) and ``max_kept`` stacks are remembered (the least recently
    asked for is forgotten first). A probe that fails is not remembered: its error goes to every
    ask that waited for it."""

    def __init__(self, factory: EnvFactory, *, max_concurrent: int = 2, max_kept: int = 256) -> None:
        self.factory = factory
        self.max_kept = max_kept
        self._kept: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self._running: dict[str, asyncio.Future[list[dict[str, Any]]]] = {}
        self._slots = asyncio.Semaphore(max_concurrent)

    async def tools(self, env_id: str, request: MakeRequest) -> list[dict[str, Any]]:
        """The MCP tools a reset of the stack ``request`` of ``env_id`` announces."""
        key = json.dumps([env_id, request.model_dump(mode="json")], sort_keys=True)
        kept = self._kept.get(key)
        if kept is not None:
            self._kept.move_to_end(key)
            return kept
        running = self._running.get(key)
        if running is None:
            running = self._running[key] = asyncio.ensure_future(self._probe(key, env_id, request))
        return await asyncio.shield(running)  # one asker's cancellation does not cancel the others' probe

    async def _probe(self, key: str, env_id: str, request: MakeRequest) -> list[dict[str, Any]]:
        try:
            async with self._slots:
                tools = await asyncio.to_thread(probe_tools, self.factory, env_id, request)
            self._kept[key] = tools
            if len(self._kept) > self.max_kept:
                self._kept.popitem(last=False)
            return tools
        finally:
            del self._running[key]


def mcp_tools_as_jsonrpc(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """MCP tools as MCP's ``tools/list`` result names their fields (``inputSchema``)."""
    return [{"name": t["name"], "description": t["description"], "inputSchema": t["input_schema"]} for t in tools]


def list_tools_result(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """openenv-core's serialized ``ListToolsObservation``."""
    return {"observation": {"tools": tools}, "reward": None, "done": False}


def call_tool_step(session: Session, action: Mapping[str, Any]) -> dict[str, Any]:
    """Play a ``call_tool`` action as the local step ``{"name": tool_name, "arguments":
    arguments}``; openenv-core's serialized ``CallToolObservation`` of the step's result.
    ProtocolError RESET_NEEDED before the session's first reset (as any step)."""
    tool_name = action.get("tool_name")
    step = session.step({"name": tool_name, "arguments": action.get("arguments", {})})
    observation = step["observation"]
    return {
        "observation": {
            "tool_name": tool_name if isinstance(tool_name, str) else "",
            "result": tool_result(observation["value"], observation["info"]),
            "error": None,
            "metadata": {
                "info": observation["info"],
                "terminated": observation["terminated"],
                "truncated": observation["truncated"],
            },
        },
        "reward": step["reward"],
        "done": step["done"],
    }


def tool_result(value: Any, info: Mapping[str, Any]) -> dict[str, Any]:
    """A step's observation as FastMCP's ``CallToolResult`` serializes: ``data`` the observation
    (what ``MCPToolClient.call_tool`` returns), ``content`` it as one text (a string as it is,
    anything else as JSON), ``is_error`` when the step's ``info["ok"]`` is False."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=repr)
    return {
        "content": [{"type": "text", "text": text, "annotations": None, "meta": None}],
        "structured_content": None,
        "meta": None,
        "data": value,
        "is_error": info.get("ok") is False,
    }


async def list_tools(session: Session, probes: ToolProbes) -> list[dict[str, Any]]:
    """The tools of the session's current episode; before its first reset, those a reset of its
    stack announces (:class:`ToolProbes`)."""
    if session.tools is not None:
        return mcp_tools(session.tools)
    return await probes.tools(session.env_id, session.make_request)


async def mcp_step(session: Session, probes: ToolProbes, action: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The answer to the MCP step action ``action`` of type ``kind`` (see :func:`mcp_action`)."""
    if kind == "list_tools":
        return list_tools_result(await list_tools(session, probes))
    return call_tool_step(session, action)


def jsonrpc_error(code: int, message: str, request_id: Any = None) -> dict[str, Any]:
    """A JSON-RPC 2.0 error response (openenv-core's ``JsonRpcResponse.error_response``)."""
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message, "data": None}}


def jsonrpc_result(result: Any, request_id: Any) -> dict[str, Any]:
    """A JSON-RPC 2.0 success response."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, SERVER_ERROR = -32700, -32600, -32601, -32602, -32000
"""JSON-RPC 2.0 error codes (openenv-core's ``JsonRpcErrorCode``)."""


def jsonrpc_request(body: Any) -> tuple[str, dict[str, Any], Any]:
    """``(method, params, id)`` of a JSON-RPC 2.0 request (openenv-core's ``JsonRpcRequest``:
    ``jsonrpc`` "2.0", a string ``method``, object ``params``, string or integer ``id``, nothing
    else); ProtocolError VALIDATION_ERROR otherwise (answered as JSON-RPC INVALID_REQUEST)."""
    if not isinstance(body, dict) or body.get("jsonrpc") != "2.0" or not isinstance(body.get("method"), str):
        raise ProtocolError("VALIDATION_ERROR", 'a JSON-RPC request is {"jsonrpc": "2.0", "method": str, ...}')
    extra = body.keys() - {"jsonrpc", "method", "params", "id"}
    params, request_id = body.get("params", {}), body.get("id")
    if extra or not isinstance(params, dict) or not (request_id is None or type(request_id) in (str, int)):
        raise ProtocolError("VALIDATION_ERROR", "JSON-RPC fields: jsonrpc, method, params (an object), id")
    return body["method"], params, request_id

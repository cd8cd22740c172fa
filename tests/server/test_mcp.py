"""OpenEnv's MCP tool path against ``ace-gym serve``: openenv-core's ``MCPToolClient`` lists the
env's tools and plays a solver's episode by ``call_tool``, byte for byte the local episode; the
JSON-RPC ``/mcp`` endpoint; openenv-core's runtime validation; the manifest and the Dockerfile."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("fastapi", reason="the serve extra installs fastapi, uvicorn, websockets and httpx")

import httpx

from ace_gym.agents import ExactSolver
from ace_gym.server.config import ServerConfig
from ace_gym.server.factory import EnvFactory
from ace_gym.server.mcp import ToolProbes, mcp_tools
from ace_gym.server.protocol import MakeRequest
from tests.server_helpers import ROOT, as_sent, serve_process, serving

ENV_ID = "ACE-course-v0"
RESET = {"seed": 0, "options": {"instance_index": 9}}


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    """``ace-gym serve --env ACE-course-v0``: the root endpoints serve the id, as in the Docker image."""
    with serve_process("--env", ENV_ID) as (url, _):
        yield url


def local_tools(env_id: str = ENV_ID) -> list[dict[str, Any]]:
    _, info = gym.make(env_id).reset(**RESET)
    return json.loads(json.dumps([{**t["function"]} for t in info["tools"]]))


def test_mcp_tool_client__lists_exactly_the_envs_tools(served: str) -> None:
    mcp_client = pytest.importorskip("openenv.core.mcp_client")
    expected = local_tools()
    with mcp_client.MCPToolClient(base_url=served).sync() as client:
        before_reset = client.list_tools(use_cache=False)  # OpenEnv: discovery needs no reset
        client.reset(**RESET)
        tools = client.list_tools(use_cache=False)
    for listed in (before_reset, tools):
        assert [(t.name, t.description, t.input_schema) for t in listed] == [
            (t["name"], t["description"], t["parameters"]) for t in expected
        ]


def test_mcp_tool_client__plays_a_solver_episode_byte_identical_to_the_local_one(served: str) -> None:
    mcp_client = pytest.importorskip("openenv.core.mcp_client")
    mcp_types = pytest.importorskip("openenv.core.env_server.mcp_types")
    local = gym.make(ENV_ID)
    observation, info = local.reset(**RESET)
    episode = ExactSolver().start(observation, info, seed=0)
    remote_reply, steps, done = observation, 0, False
    with mcp_client.MCPToolClient(base_url=served).sync() as client:
        client.reset(**RESET)
        while not done:
            call = episode.act(remote_reply)
            assert isinstance(call, dict) and not episode.batched
            local_reply, reward, terminated, truncated, local_info = local.step(call)
            action = mcp_types.CallToolAction(tool_name=call["name"], arguments=call["arguments"])
            result = client.step(action)
            remote = result.observation
            assert remote.tool_name == call["name"] and remote.error is None
            assert remote.result["data"] == local_reply  # the reply's text, byte for byte
            assert remote.result["content"][0]["text"] == local_reply
            assert (result.reward, result.done) == (reward, terminated or truncated)
            assert remote.metadata == {"info": as_sent(local_info), "terminated": terminated, "truncated": truncated}
            remote_reply, done, steps = remote.result["data"], result.done, steps + 1
        assert local_info["score"] == 1.0 and reward == 1.0 and steps > 5
        # call_tool, the client's convenience, returns the reply itself
        client.reset(**RESET)
        local.reset(**RESET)
        first = episode_first_call()
        assert client.call_tool(first["name"], **first["arguments"]) == local.step(first)[0]


def episode_first_call() -> dict[str, Any]:
    observation, info = gym.make(ENV_ID).reset(**RESET)
    call = ExactSolver().start(observation, info, seed=0).act(observation)
    assert isinstance(call, dict)
    return call


@pytest.mark.parametrize(
    "action",
    [
        {"type": "call_tool", "tool_name": "no_such_tool", "arguments": {}},
        {"type": "call_tool", "tool_name": "set_slot", "arguments": {"row": "x"}},
        {"type": "call_tool", "tool_name": "set_slot", "arguments": [1, 2]},
        {"type": "call_tool", "tool_name": 7},
        {"type": "call_tool"},
    ],
)
def test_call_tool__a_malformed_call_is_the_envs_error_observation(action: dict[str, Any]) -> None:
    local = gym.make(ENV_ID)
    local.reset(**RESET)
    expected = local.step({"name": action.get("tool_name"), "arguments": action.get("arguments", {})})
    with serving(ServerConfig(env_ids=(ENV_ID,))) as (url, _), httpx.Client(base_url=url, timeout=30) as http:
        session_id = http.post("/reset", json=RESET).json()["session_id"]
        reply = http.post("/step", json={"action": action, "session_id": session_id})
        assert reply.status_code == 200, reply.text
        answer = reply.json()
        result = answer["observation"]["result"]
        assert result["data"] == expected[0] and json.loads(result["data"])["status"] == "failed"
        assert result["is_error"] is True and answer["observation"]["error"] is None
        assert (answer["reward"], answer["done"]) == (expected[1], expected[2] or expected[3])
        # the session goes on: the next call is answered as the local env answers it
        query = {"type": "call_tool", "tool_name": "get_current_grid_state", "arguments": {}}
        reply = http.post("/step", json={"action": query, "session_id": session_id}).json()
        assert reply["observation"]["result"]["data"] == local.step({"name": query["tool_name"], "arguments": {}})[0]


@pytest.mark.parametrize("kind", [["list_tools"], {"call_tool": 1}, 7, None])
def test_step__an_action_whose_type_is_no_mcp_name_is_stepped_as_the_local_env_steps_it(kind: Any) -> None:
    """Any JSON may come as ``type`` (an unhashable list or object once answered 500)."""
    action = {"type": kind, "name": "get_current_grid_state", "arguments": {}}
    local = gym.make(ENV_ID)
    local.reset(**RESET)
    with serving(ServerConfig(env_ids=(ENV_ID,))) as (url, _), httpx.Client(base_url=url, timeout=30) as http:
        session_id = http.post("/reset", json=RESET).json()["session_id"]
        reply = http.post("/step", json={"action": action, "session_id": session_id})
        assert reply.status_code == 200, reply.text
        assert reply.json()["observation"]["value"] == local.step(action)[0]


def test_http_step__list_tools_without_a_session_answers_a_fresh_envs_tools() -> None:
    """OpenEnv's stateless HTTP ``/step``: ``list_tools`` needs no session; other actions do."""
    with serving(ServerConfig(env_ids=(ENV_ID,))) as (url, app), httpx.Client(base_url=url, timeout=30) as http:
        reply = http.post("/step", json={"action": {"type": "list_tools"}})
        assert reply.status_code == 200 and reply.json() == {
            "observation": {"tools": mcp_tools(gym.make(ENV_ID).reset(**RESET)[1]["tools"])},
            "reward": None,
            "done": False,
        }
        assert len(app.state.store) == 0  # no session opened
        reply = http.post("/step", json={"action": {"name": "get_current_grid_state", "arguments": {}}})
        assert reply.status_code == 404 and reply.json()["code"] == "UNKNOWN_SESSION"


def test_jsonrpc_mcp__lists_tools_and_plays_a_session() -> None:
    local = gym.make(ENV_ID)
    local.reset(**RESET)
    call = episode_first_call()
    with serving(ServerConfig(env_ids=(ENV_ID,))) as (url, _), httpx.Client(base_url=url, timeout=30) as http:

        def rpc(method: str, **params: Any) -> Any:
            reply = http.post("/mcp", json={"jsonrpc": "2.0", "method": method, "params": params, "id": 1})
            assert reply.status_code == 200, reply.text
            return reply.json()

        tools = rpc("tools/list")["result"]["tools"]
        assert [t["inputSchema"] for t in tools] == [t["parameters"] for t in local_tools()]
        session_id = http.post("/reset", json=RESET).json()["session_id"]
        result = rpc("tools/call", name=call["name"], arguments=call["arguments"], session_id=session_id)["result"]
        reply, reward, *_ = local.step(call)
        assert result["data"] == reply and result["meta"]["reward"] == reward
        assert rpc("tools/call", name="set_slot", arguments={})["error"]["code"] == -32602  # no session
        for bad in ({}, {"name": 7}, {"name": None, "arguments": [1]}):  # the env answers, as on /step
            result = rpc("tools/call", session_id=session_id, **bad)["result"]
            assert result["data"] == local.step({"name": bad.get("name"), "arguments": bad.get("arguments", {})})[0]
            assert result["is_error"] is True
        assert rpc("no/such/method")["error"]["code"] == -32601
        created = rpc("openenv/session/create", seed=0)["result"]["session_id"]
        assert rpc("openenv/session/close", session_id=created)["result"] == {"session_id": created, "closed": True}
        assert http.post("/mcp", content=b"{oops").json()["error"]["code"] == -32700
        assert http.post("/mcp", json={}).json()["error"]["code"] == -32600
        assert (
            http.post("/mcp", json={"jsonrpc": "2.0", "method": "tools/list", "params": []}).json()["jsonrpc"] == "2.0"
        )


def test_openenv_runtime_validation__passes(served: str) -> None:
    validation = pytest.importorskip("openenv.cli._validation")
    report = validation.validate_running_environment(served, timeout_s=30)
    assert report["passed"], json.dumps(report["criteria"], indent=1)
    assert report["mode"] == "simulation"


def test_manifest__names_the_server_the_dockerfile_runs() -> None:
    yaml = pytest.importorskip("yaml")
    manifest = yaml.safe_load((ROOT / "openenv.yaml").read_text())
    assert manifest["spec_version"] == 1 and manifest["type"] == "space" and manifest["runtime"] == "fastapi"
    assert re.fullmatch(r"[a-z0-9_]+", manifest["name"])
    from ace_gym.version import __version__

    assert manifest["version"] == __version__  # openenv validate (openenv 0.10) requires these two
    validation = manifest["validation"]
    assert {"reward", "resources", "capabilities", "types"} <= set(validation)
    assert validation["reward"]["range"] == [0.0, 1.0] and validation["capabilities"]["verifier"]["kind"]
    assert {"cpu", "memory_mb", "disk_mb", "episode_timeout_s"} <= set(validation["resources"])
    module, _, factory = manifest["app"].partition(":")
    assert factory == "create_app" and module == "ace_gym.server.app"  # uvicorn --factory's target
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.1[0-3]", dockerfile, re.MULTILINE)  # a Python the project supports
    assert re.search(r"^COPY pyproject\.toml README\.md LICENSE \./", dockerfile, re.MULTILINE)
    assert re.search(r"^COPY ace_gym \./ace_gym", dockerfile, re.MULTILINE)
    assert re.search(r'pip install --no-cache-dir "\.\[serve\]"', dockerfile)  # the project from its own files
    assert re.search(rf"^EXPOSE {manifest['port']}$", dockerfile, re.MULTILINE)
    entrypoint = json.loads(re.search(r"^ENTRYPOINT (\[.*\])$", dockerfile, re.MULTILINE).group(1))  # type: ignore[union-attr]
    assert entrypoint == ["ace-gym", "serve", "--host", "0.0.0.0", "--port", str(manifest["port"])]
    command = json.loads(re.search(r"^CMD (\[.*\])$", dockerfile, re.MULTILINE).group(1))  # type: ignore[union-attr]
    assert command[0] == "--env" and all(env_id in gym.registry for env_id in command[1:])


def test_websocket__attached_to_an_mcp_session_resets_the_session_the_tool_calls_play() -> None:
    """OpenEnv 0.10's ``MCPToolClient`` opens a session with ``openenv/session/create``, connects
    the WebSocket with ``?session_id=``, resets there and calls tools over ``POST /mcp`` naming
    the session: reset and calls must meet in one env (they met in two: 1 of 39 replies matched)."""
    from websockets.sync.client import connect

    local = gym.make(ENV_ID)
    local.reset(**RESET)
    call = episode_first_call()
    with serving(ServerConfig(env_ids=(ENV_ID,))) as (url, app), httpx.Client(base_url=url, timeout=30) as http:

        def rpc(method: str, **params: Any) -> Any:
            return http.post("/mcp", json={"jsonrpc": "2.0", "method": method, "params": params, "id": 1}).json()

        session_id = rpc("openenv/session/create")["result"]["session_id"]
        ws_url = url.replace("http://", "ws://") + f"/ws?session_id={session_id}"
        with connect(ws_url) as connection:
            connection.send(json.dumps({"type": "reset", "data": RESET}))
            assert json.loads(connection.recv())["type"] == "observation"
            result = rpc("tools/call", name=call["name"], arguments=call["arguments"], session_id=session_id)
            assert result["result"]["data"] == local.step(call)[0]
            assert len(app.state.store) == 1  # the connection holds no session of its own
        assert len(app.state.store) == 1  # closing the connection leaves the session to its owner
        grid = rpc("tools/call", name="get_current_grid_state", arguments={}, session_id=session_id)["result"]["data"]
        assert grid == local.step({"name": "get_current_grid_state", "arguments": {}})[0]
        assert rpc("openenv/session/close", session_id=session_id)["result"]["closed"] is True
        with connect(ws_url) as connection:  # a closed (or unknown) session is refused in one frame
            assert json.loads(connection.recv())["data"]["code"] == "UNKNOWN_SESSION"


def test_list_tools_without_a_session__probes_one_env_per_id_however_many_ask(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 40: each ``tools/list`` and session-less ``list_tools`` built and reset a throwaway env
    (0.87 s of CPU on a procedural id): 64 requests from 16 clients kept a reset waiting 23.9 s."""
    made: list[str] = []
    make = EnvFactory.make

    def counted(self: EnvFactory, env_id: str, request: Any) -> Any:
        made.append(env_id)
        return make(self, env_id, request)

    monkeypatch.setattr(EnvFactory, "make", counted)
    expected = mcp_tools(gym.make(ENV_ID).reset(**RESET)[1]["tools"])
    with serving(ServerConfig(env_ids=(ENV_ID,))) as (url, _), httpx.Client(base_url=url, timeout=60) as http:

        def ask(number: int) -> list[dict[str, Any]]:
            if number % 2:
                reply = http.post("/mcp", json={"jsonrpc": "2.0", "method": "tools/list", "params": {}, "id": number})
                tools = reply.json()["result"]["tools"]
                return [
                    {"name": t["name"], "description": t["description"], "input_schema": t["inputSchema"]}
                    for t in tools
                ]
            return http.post("/step", json={"action": {"type": "list_tools"}}).json()["observation"]["tools"]

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(ask, range(24)))
    assert all(answer == expected for answer in answers)
    assert made == [ENV_ID]


class _SlowProbeFactory:
    """An EnvFactory stand-in whose envs take a while to reset, counting probes in flight."""

    def __init__(self) -> None:
        self.running = self.most_running = 0
        self.made: list[str] = []
        self.lock = threading.Lock()

    def make(self, env_id: str, request: Any) -> Any:
        factory = self

        class Env:
            def reset(self, seed: int) -> tuple[str, dict[str, Any]]:
                with factory.lock:
                    factory.running += 1
                    factory.most_running = max(factory.most_running, factory.running)
                time.sleep(0.02)
                with factory.lock:
                    factory.running -= 1
                name = {"type": "function", "function": {"name": env_id, "parameters": {}}}
                return "", {"tools": [name]}

            def close(self) -> None:
                pass

        self.made.append(env_id)
        return Env()


def test_tool_probes__one_probe_per_stack_at_most_max_concurrent_at_once_and_the_least_recent_forgotten() -> None:
    factory = _SlowProbeFactory()
    probes = ToolProbes(factory, max_concurrent=2, max_kept=4)  # type: ignore[arg-type]
    stacks = [f"ACE-{name}-v0" for name in ("course", "meal", "travel", "shopping", "pc_build", "workforce")]

    async def ask_all() -> list[list[dict[str, Any]]]:
        return await asyncio.gather(*(probes.tools(env_id, MakeRequest()) for env_id in stacks * 3))

    answers = asyncio.run(ask_all())
    assert [answer[0]["name"] for answer in answers] == stacks * 3
    assert sorted(factory.made) == sorted(stacks) and factory.most_running <= 2
    asyncio.run(probes.tools(stacks[-1], MakeRequest()))  # remembered
    asyncio.run(probes.tools(stacks[0], MakeRequest()))  # forgotten: one of six, four kept
    assert len(factory.made) == 7 and factory.made[-1] == stacks[0]

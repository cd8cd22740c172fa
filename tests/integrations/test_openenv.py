"""ace_gym.integrations.openenv: an ace-gym env served by openenv-core's own create_app."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("openenv.core")
pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

from ace_gym.integrations.openenv import create_openenv_app
from ace_gym.policies import make_scripted_policy
from ace_gym.server.protocol import ERROR_STATUS, dumps, reset_result, step_result


def _request(websocket: Any, kind: str, data: Any) -> dict[str, Any]:
    websocket.send_text(json.dumps({"type": kind, "data": data}))
    reply: dict[str, Any] = json.loads(websocket.receive_text())
    assert reply["type"] == "observation", reply
    return reply["data"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("on_loop", [True, False])
def test_openenv_app__plays_a_solver_episode_as_the_local_env_and_ace_gym_serve_answer_it(on_loop: bool) -> None:
    local = gym.make("ACE-course-v0", disable_env_checker=True)
    observation, info = local.reset(seed=3)
    episode = make_scripted_policy("solver").start(observation, info, 3)
    with TestClient(create_openenv_app(max_sessions=2, on_loop=on_loop)) as client:
        with client.websocket_connect("/ws") as websocket:
            remote = _request(websocket, "reset", {"seed": 3})
            assert remote == json.loads(dumps(reset_result(observation, info)))
            for _ in range(500):
                action = episode.act(observation)
                assert isinstance(action, dict)
                result = local.step(action)
                remote = _request(websocket, "step", action)
                assert remote == json.loads(dumps(step_result(*result)))
                observation = result[0]
                if remote["done"]:
                    break
    assert remote["done"] and remote["reward"] == 1.0


def test_openenv_app__a_malformed_call_is_the_envs_error_observation() -> None:
    with TestClient(create_openenv_app(max_sessions=1)) as client:
        with client.websocket_connect("/ws") as websocket:
            _request(websocket, "reset", {"seed": 0})
            reply = _request(websocket, "step", {"name": 5, "arguments": "not an object"})
    assert json.loads(reply["observation"]["value"])["status"] == "failed"
    assert reply["done"] is False and reply["observation"]["info"]["ok"] is False


@pytest.mark.parametrize(
    "action",
    [
        {"name": "get_current_grid_state", "arguments": {}, "id": "call_1"},  # an OpenAI-style call
        {"tool": "get_current_grid_state", "args": {}},
        {"name": "get_current_grid_state", "arguments": {}, "metadata": "not an object"},
        {},
    ],
)
def test_openenv_app__any_action_is_stepped_as_the_local_env_steps_it(action: dict[str, Any]) -> None:
    """Extra or missing keys are the env's to answer (openenv's Action forbids extras by default)."""
    local = gym.make("ACE-course-v0", disable_env_checker=True)
    local.reset(seed=0)
    expected = json.loads(dumps(step_result(*local.step({k: v for k, v in action.items() if k != "metadata"}))))
    with TestClient(create_openenv_app(max_sessions=1)) as client:
        with client.websocket_connect("/ws") as websocket:
            _request(websocket, "reset", {"seed": 0})
            reply = _request(websocket, "step", action)
    assert reply["observation"] == expected["observation"]
    assert (reply["reward"], reply["done"]) == (expected["reward"], expected["done"])


def test_openenv_app__http_step_is_refused_as_ace_gym_serve_refuses_a_step_before_reset() -> None:
    """Issue 40: OpenEnv's HTTP /step steps a fresh env, which answered 500 to every action."""
    with TestClient(create_openenv_app(max_sessions=1), raise_server_exceptions=False) as client:
        reply = client.post("/step", json={"action": {"name": "get_current_grid_state", "arguments": {}}})
    assert reply.status_code == ERROR_STATUS["RESET_NEEDED"] == 409
    assert "call reset before step" in reply.json()["detail"]


@pytest.mark.parametrize("options", [{"instance_index": 10**6}, {"instance_id": "no_such_instance"}])
def test_openenv_app__http_reset_with_options_the_env_refuses_is_a_422_naming_them(options: dict[str, Any]) -> None:
    """Issue 40: a 500, where ``ace-gym serve`` answers 422."""
    with TestClient(create_openenv_app(max_sessions=1), raise_server_exceptions=False) as client:
        reply = client.post("/reset", json={"seed": 0, "options": options})
        assert client.post("/reset", json={"seed": 0}).status_code == 200
    assert reply.status_code == ERROR_STATUS["VALIDATION_ERROR"] == 422
    assert "reset refused" in reply.json()["detail"] and next(iter(options)) in reply.json()["detail"]

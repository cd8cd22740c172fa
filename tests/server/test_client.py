"""RemoteEnv and the collector against a served env behave as the local env; OpenEnv's own client
drives the server."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("fastapi", reason="the serve extra installs fastapi, uvicorn, websockets and httpx")

from gymnasium.error import ResetNeeded
from gymnasium.utils.env_checker import check_env

from ace_gym.cli import main
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.eval.remote import RemoteStackFactory
from ace_gym.eval.replay import replay_record
from ace_gym.policies import make_scripted_policy
from ace_gym.runs.results import read_records
from ace_gym.server.client import RemoteEnv, RemoteEnvError
from ace_gym.server.config import ServerConfig
from ace_gym.spaces import ToolCall
from tests.eval.test_rollout import SolverChatEngine
from tests.server_helpers import serving, step_as_sent

# what differs between two runs of the same episode: timings
_TIMINGS = ("time_s", "env_s", "generation_s")


@pytest.fixture(scope="module")
def url() -> Any:
    with serving(ServerConfig()) as (base_url, _):
        yield base_url


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    usage = {k: v for k, v in record["usage"].items() if k not in _TIMINGS}
    return json.loads(json.dumps({**record, "usage": usage}))


def test_remote_env__passes_gymnasiums_env_checker(url: str) -> None:
    with RemoteEnv(url, "ACE-course-v0") as env, warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env, skip_render_check=True)


@pytest.mark.parametrize("env_id", ["ACE-workforce-v0", "ACE-pc_build-procedural-v0"])
def test_remote_env__same_seed_same_episode_as_the_local_env(url: str, env_id: str) -> None:
    local = gym.make(env_id)
    with RemoteEnv(url, env_id) as remote:
        assert (remote.observation_space, remote.action_space) == (local.observation_space, local.action_space)
        local_observation, local_info = local.reset(seed=11)
        observation, info = remote.reset(seed=11)
        assert observation == local_observation and info == json.loads(json.dumps(local_info))
        for action in [remote.action_space.sample() for _ in range(20)] + [ToolCall("done"), {"bad": 1}]:
            expected = local.step(action if not isinstance(action, ToolCall) else action.__dict__)
            assert list(remote.step(action)) == step_as_sent(expected)


def test_remote_env__errors_are_typed(url: str) -> None:
    with RemoteEnv(url, "ACE-course-v0") as env:
        with pytest.raises(ResetNeeded):
            env.step({"name": "done", "arguments": {}})
        with pytest.raises(RemoteEnvError, match="VALIDATION_ERROR"):
            env.reset(options={"instance_index": -1})
        env.reset(seed=0)  # the session survives refused requests
    with pytest.raises(RemoteEnvError, match="FACTORY_ERROR"):
        RemoteEnv(url, "ACE-course-v0", max_steps=0)
    with pytest.raises(RemoteEnvError, match="UNKNOWN_ENV"):
        RemoteEnv(url, "ACE-course-v7")
    with pytest.raises(RemoteEnvError, match="CONNECTION"):
        RemoteEnv("http://127.0.0.1:1", "ACE-course-v0", timeout_s=2)
    env = RemoteEnv(url, "ACE-course-v0")
    env.close()
    with pytest.raises(RemoteEnvError, match="closed"):
        env.reset()


def test_remote_env__an_action_json_cannot_hold_is_the_envs_error_and_the_session_goes_on(url: str) -> None:
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    deep: list[Any] = []
    innermost = deep
    for _ in range(5000):
        innermost.append([])
        innermost = innermost[0]
    local = gym.make("ACE-course-v0")
    local.reset(seed=0)
    with RemoteEnv(url, "ACE-course-v0", timeout_s=30) as remote:
        remote.reset(seed=0)
        for arguments in ({"row": cycle, "col": 0, "id": "C1"}, {"row": deep, "col": 0, "id": "C1"}):
            action = {"name": "set_slot", "arguments": arguments}
            observation, reward, terminated, truncated, info = remote.step(action)
            assert [observation, reward, terminated, truncated, info] == step_as_sent(local.step(action))
            assert json.loads(observation)["status"] == "failed"
        observation, *_ = remote.step({"name": "set_slot", "arguments": {"row": 10**5000, "col": 0, "id": "C1"}})
        assert json.loads(observation)["status"] == "failed"  # the integer arrives as "<16610-bit integer>"
        observation, *_ = remote.step({"name": "get_current_grid_state", "arguments": {}})
        assert json.loads(observation)["status"] == "success"
        assert remote.state()["step_count"] == 4


def _specs() -> list[EpisodeSpec]:
    return [
        EpisodeSpec.of("meal", instance_index=3, seed=5, tool_failure_rate=0.2, max_turns=200),
        EpisodeSpec.of("travel", instance_index=20, seed=1, env_kwargs={"extra_query_num": 0}),
    ]


def test_run_episodes__scripted_records_against_a_server_equal_the_local_ones(url: str) -> None:
    local = [comparable(r) for r in run_episodes(_specs(), make_scripted_policy("solver"))]
    remote = [
        comparable(r) for r in run_episodes(_specs(), make_scripted_policy("solver"), make_env=RemoteStackFactory(url))
    ]
    assert remote == local
    assert [r["score"] for r in remote] == [1, 1]


def test_run_episodes__failure_modes_reach_the_server_and_remote_records_replay_locally(url: str) -> None:
    options = {"failure_modes": ["timeout", "rate_limit"], "tool_rates": {"done": 0.0}}
    specs = [EpisodeSpec.of("meal", instance_index=0, seed=1, tool_failure_rate=0.5, failure_injection=options)]
    policy = make_scripted_policy("probe-retry-failures")
    local = [comparable(r) for r in run_episodes(specs, policy)]
    remote = [comparable(r) for r in run_episodes(specs, policy, make_env=RemoteStackFactory(url))]
    assert remote == local and {f["mode"] for f in remote[0]["failures"]} == {"timeout", "rate_limit"}
    assert replay_record(remote[0]) is None


def test_run_episodes__chat_engine_records_against_a_server_equal_the_local_ones(url: str) -> None:
    local = [comparable(r) for r in run_episodes(_specs(), SolverChatEngine(), batch_size=2)]
    remote = [
        comparable(r)
        for r in run_episodes(_specs(), SolverChatEngine(), batch_size=2, make_env=RemoteStackFactory(url))
    ]
    assert remote == local
    assert all(r["turns"] and r["messages"][-1]["role"] == "tool" for r in remote)


def test_eval_env_url__writes_the_records_a_local_run_writes(url: str, tmp_path: Path) -> None:
    selection = ["--policy", "greedy", "--domains", "shopping", "--hidden", "1,5", "--no-progress"]
    assert main(["eval", *selection, "--out", str(tmp_path / "local")]) == 0
    assert main(["eval", *selection, "--out", str(tmp_path / "remote"), "--env-url", url]) == 0
    local = [comparable(r) for r in read_records(tmp_path / "local" / "episodes.jsonl")]
    remote = [comparable(r) for r in read_records(tmp_path / "remote" / "episodes.jsonl")]
    assert remote == local and len(remote) == 14


def test_eval_env_url__unreachable_server_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    arguments = ["eval", "--policy", "greedy", "--domains", "meal", "--hidden", "1", "--no-progress"]
    assert main([*arguments, "--out", str(tmp_path / "run"), "--env-url", "http://127.0.0.1:1"]) == 2
    assert "CONNECTION" in capsys.readouterr().err


def test_openenv_generic_client__drives_the_server(url: str) -> None:
    openenv = pytest.importorskip("openenv.core")
    local = gym.make("ACE-course-v0")
    local_observation, _ = local.reset(seed=0, options={"instance_index": 9})
    query = {
        "name": "query_course_candidate_from_attribute",
        "arguments": {"row": 2, "col": 3, "field": "price", "operator": "<=", "value": 300},
    }
    with openenv.GenericEnvClient(base_url=f"{url}/envs/ACE-course-v0").sync() as client:
        result = client.reset(seed=0, options={"instance_index": 9})
        assert result.observation["value"] == local_observation and result.done is False
        result = client.step(query)
        assert result.observation["value"] == local.step(query)[0] and result.reward == 0.0
        result = client.step({"name": "done", "arguments": {}})
        assert result.done is True and result.reward == 0.0
        assert client.state()["step_count"] == 2

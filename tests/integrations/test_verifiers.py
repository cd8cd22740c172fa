"""Prime Intellect's verifiers: its own loader finds the ace-gym plugin, and its own classes
(``Env.serving``/``run_episode``, the interception server, the agent's rollout) play ACE episodes
against an OpenAI-compatible stub on 127.0.0.1 whose 'model' is the exact solver."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

vf = pytest.importorskip("verifiers.v1")

from verifiers.v1.clients import EvalClientConfig, ModelContext  # noqa: E402

from ace_gym.agents import BatchingSolver, ExactSolver  # noqa: E402
from ace_gym.domains import DOMAIN_NAMES  # noqa: E402
from ace_gym.domains.tool_names import tool_names  # noqa: E402
from ace_gym.envs import AceEnv  # noqa: E402
from ace_gym.errors import ConfigError  # noqa: E402
from ace_gym.eval import EpisodeSpec  # noqa: E402
from ace_gym.eval.fit import FIT, TRAINING_DATASET  # noqa: E402
from ace_gym.integrations.verifiers import (  # noqa: E402
    PLUGIN_ID,
    REWARD,
    AceChatHarness,
    AceTaskset,
    AceVerifiersEnv,
    task_data,
)
from tests.chat_server import ChatServer, chat_response, tool_call  # noqa: E402

MALFORMED = "<tool_call>{'name': set_slot, oops</tool_call>"


class SolverModel:
    """Answers each chat request with the solver's next calls as native ``tool_calls`` (all the
    calls of a turn with ``batching``), fed the tool replies after the request's last assistant
    message. The first ``malformed`` requests get an unreadable reply instead."""

    def __init__(self, spec: EpisodeSpec, *, batching: bool = False, malformed: int = 0) -> None:
        env = AceEnv(**spec.stack.env_kwargs)
        observation, info = env.reset(seed=spec.seed, options=spec.reset_options())
        self.episode = (BatchingSolver() if batching else ExactSolver()).start(observation, info, seed=0)
        self.malformed = malformed
        self.requests: list[dict[str, Any]] = []
        self.calls_per_turn: list[int] = []
        self.turns: list[dict[str, Any]] = []  # the assistant messages answered

    def __call__(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests.append(body)
        if len(self.requests) <= self.malformed:
            return 200, chat_response(MALFORMED)
        last = max(k for k, m in enumerate(body["messages"]) if m["role"] != "tool")
        replies = [m["content"] for m in body["messages"][last + 1 :] if m["role"] == "tool"]
        made = self.episode.act(replies if getattr(self.episode, "batched", False) else (replies or [""])[-1])
        turn = made if isinstance(made, list) else [made]
        self.calls_per_turn.append(len(turn))
        n = len(self.requests)
        response = chat_response(
            None, [tool_call(c["name"], c["arguments"], f"call_{n}_{k}") for k, c in enumerate(turn)]
        )
        self.turns.append(response["choices"][0]["message"])
        return 200, response


def load_env(player: dict[str, Any] | None = None, **taskset: Any) -> Any:
    """The env verifiers' own loader builds for the plugin id (``player``: the agent's config)."""
    config: dict[str, Any] = {"taskset": {"id": PLUGIN_ID, **taskset}}
    if player is not None:
        config["player"] = player
    return vf.load_environment(vf.resolve_env_config(config))


def play(env: Any, task: Any, answer: Any, *, listening: bool = True) -> Any:
    """One episode of ``task`` the way vf-eval runs it (inside ``serving()``, ``run_episode``),
    the model a stub on 127.0.0.1 answering with ``answer`` (refusing connections unless ``listening``)."""
    server = ChatServer(answer, listening=listening)
    ctx = ModelContext(model="tiny", client=EvalClientConfig(base_url=server.url, api_key_var="ACE_GYM_TEST_KEY"))

    async def episode() -> Any:
        async with env.serving():
            return await asyncio.wait_for(env.run_episode(task, ctx), timeout=120)

    try:
        return asyncio.run(episode())
    finally:
        server.close()


def task_named(env: Any, name: str) -> Any:
    return next(task for task in env.taskset if task.data.name == name)


def test_loader__finds_the_plugin_env_taskset_and_harness() -> None:
    env = load_env(domains=["course"])
    assert isinstance(env, AceVerifiersEnv)
    assert isinstance(env.taskset, AceTaskset)
    assert isinstance(env._harnesses["player"], AceChatHarness)  # the taskset's own harness is the default


def test_taskset__plays_the_recommended_training_settings_unless_told_otherwise() -> None:
    (spec, *_) = load_env(domains=["course"]).taskset.specs()
    assert dict(spec.stack.env_kwargs) == {"domain": "course", "dataset": TRAINING_DATASET, **FIT["env_kwargs"]}
    (published, *_) = load_env(domains=["course"], env_kwargs={}).taskset.specs()
    assert (
        set(published.stack.env_kwargs) == {"domain", "dataset"}
        and task_data(published).system_prompt != task_data(spec).system_prompt
    )


def test_episode__a_transient_model_error_is_retried_not_a_lost_run() -> None:
    """A loaded endpoint answers 503 now and then (vf-eval's default concurrency is 128)."""
    env = load_env(domains=["course"])
    task = task_named(env, "course#1")
    model = SolverModel(EpisodeSpec.from_json(task.data.episode))
    answered: list[int] = []

    def busy_now_and_then(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        answered.append(1)
        if len(answered) in (1, 4):
            return 503, {"error": {"message": "busy", "type": "server_error"}}
        return model(body)

    episode = play(env, task, busy_now_and_then)
    assert episode.ok, episode.errors
    assert episode.traces[0].rewards[REWARD].score == 1.0 and len(answered) == len(model.requests) + 2


def test_taskset__every_domain_with_its_tool_schemas() -> None:
    taskset = load_env().taskset
    first = {}
    for spec in taskset.specs():
        first.setdefault(spec.domain, spec)
    assert list(first) == list(DOMAIN_NAMES)
    for domain, spec in first.items():
        data = task_data(spec)
        assert [tool["function"]["name"] for tool in data.tools] == list(tool_names(domain).values())
        assert all(tool["type"] == "function" and "parameters" in tool["function"] for tool in data.tools)
        assert EpisodeSpec.from_json(data.episode) == spec


@pytest.mark.parametrize(("name", "batching"), [("course#1", False), ("pc_build#9", True)])
def test_episode__solver_through_verifiers_scores_one(name: str, batching: bool) -> None:
    env = load_env(domains=[name.split("#")[0]])
    task = task_named(env, name)
    model = SolverModel(EpisodeSpec.from_json(task.data.episode), batching=batching)
    episode = play(env, task, model)
    assert episode.ok, episode.errors
    (trace,) = episode.traces
    assert trace.rewards[REWARD].score == 1.0
    assert trace.reward == 1.0
    assert model.requests[0]["tools"] == task.data.tools  # the schemas reach the model as tools=
    if batching:
        assert max(model.calls_per_turn) > 1  # several tool calls in one model turn


def test_episode__malformed_reply_is_an_observation() -> None:
    env = load_env(domains=["course"])
    task = task_named(env, "course#1")
    model = SolverModel(EpisodeSpec.from_json(task.data.episode), malformed=2)
    episode = play(env, task, model)
    assert episode.ok, episode.errors
    corrective = model.requests[1]["messages"][-1]
    assert corrective["role"] == "user" and "tool" in corrective["content"].lower()
    assert episode.traces[0].rewards[REWARD].score == 1.0


def test_episode__degenerate_policy_scores_what_ace_scores() -> None:
    """A model that never calls a tool plays out the turn budget and gets ACE's score of the
    untouched grid, not a reward for surviving."""
    env = load_env(domains=["course"], max_turns=3)
    task = task_named(env, "course#1")
    episode = play(env, task, lambda body: (200, chat_response("I am done.")))
    assert episode.ok, episode.errors
    spec = EpisodeSpec.from_json(task.data.episode)
    untouched = AceEnv(spec.domain, spec.dataset)
    untouched.reset(seed=spec.seed, options=spec.reset_options())
    assert episode.traces[0].rewards[REWARD].score == untouched.score().score < 1.0


def test_episode__verifiers_turn_limit_scores_the_grid_as_it_stands() -> None:
    env = load_env(player={"max_turns": 4, "runtime": {"type": "subprocess"}}, domains=["course"])
    task = task_named(env, "course#1")
    model = SolverModel(EpisodeSpec.from_json(task.data.episode))
    episode = play(env, task, model)
    assert episode.ok, episode.errors
    assert len(model.requests) == 4
    spec = EpisodeSpec.from_json(task.data.episode)
    replay = spec.make_env()
    replay.reset(seed=spec.seed, options=spec.reset_options())
    for turn in model.turns:
        replay.step(turn)
    assert episode.traces[0].rewards[REWARD].score == replay.unwrapped.score().score


def test_episode__dead_endpoint_is_an_error_not_a_score() -> None:
    env = load_env(domains=["course"])
    task = task_named(env, "course#1")
    episode = play(env, task, lambda body: (200, chat_response("never")), listening=False)  # refuses connections
    assert not episode.ok
    (trace,) = episode.traces
    assert [error.type for error in trace.errors] == ["ProviderError"]
    assert REWARD not in trace.rewards  # ACE would score the untouched grid: a failed run gets nothing


@pytest.mark.parametrize(
    ("taskset", "named"),
    [
        ({"env_kwargs": {"bogus": 1}}, r"env_kwargs\['bogus'\]"),
        ({"seed": -1}, "seed=-1"),
        ({"tool_failure_rate": float("nan")}, "tool_failure_rate=nan"),
    ],
)
def test_taskset__a_setting_no_episode_plays_is_a_config_error_naming_it(taskset: dict, named: str) -> None:
    """Issue 40: a TypeError, a raw gymnasium error, and episodes without failures under ``fail=nan``."""
    with pytest.raises(ConfigError, match=named):
        list(load_env(domains=["course"], **taskset).taskset)

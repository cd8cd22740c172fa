"""The rollout collector: records, batching, groups, chat engines over the adapter, vector envs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from ace_gym.agents import ChatEngine, Completion, ExactSolver
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError
from ace_gym.eval import EpisodeSpec, rollout, run_env_episodes, run_episodes, run_vector_episodes
from ace_gym.eval.replay import replay_record
from ace_gym.instance import dataset_sha256
from ace_gym.policies import make_policy
from ace_gym.runs.loop import WALL_CLOCK_USAGE
from ace_gym.tools import tool_names
from ace_gym.wrappers import ChatAdapter, StepBudget

RECORD_KEYS = {
    "key", "policy", "dataset", "domain", "instance_id", "instance_index", "hidden_slots", "decoy_budget", "seed",
    "trial", "tool_failure_rate", "env_config", "max_turns", "settings", "score", "reason", "terminated", "truncated",
    "grid", "usage", "notes", "messages", "tools", "turns", "tokens", "curriculum_level", "replay",
    "failures",
}  # fmt: skip


class SolverChatEngine:
    """A deterministic ChatEngine: plays the exact solver through text.

    For each conversation it replays the tool replies into a fresh solver episode and writes the
    solver's next call as Hermes text (with a ``<think>`` block), with fake token ids.
    """

    name = "solver-chat"

    def __init__(self) -> None:
        self.batch_sizes: list[int] = []

    def generate(
        self, conversations: Sequence[list[dict[str, Any]]], tools: Sequence[list[dict[str, Any]]]
    ) -> list[Completion]:
        self.batch_sizes.append(len(conversations))
        completions = []
        for conversation, schemas in zip(conversations, tools, strict=True):
            names = {schema["function"]["name"] for schema in schemas}
            domain = next(d for d in DOMAIN_NAMES if set(tool_names(d).values()) == names)
            info = {"domain": domain, "system_prompt": conversation[0]["content"], "tools": schemas}
            episode = ExactSolver().start(conversation[1]["content"], info, seed=0)
            action = episode.act(conversation[1]["content"])
            for message in conversation[2:]:
                if message["role"] == "tool":
                    action = episode.act(message["content"])
            text = f"<think>turn {len(conversation)}</think>\n<tool_call>{json.dumps(action)}</tool_call>"
            completions.append(
                Completion(
                    text,
                    prompt_tokens=len(conversation),
                    completion_tokens=7,
                    prompt_token_ids=list(range(len(conversation))),
                    completion_token_ids=[1, 2, 3, 4, 5, 6, 7],
                    finish_reason="stop",
                )
            )
        return completions


class BabblingEngine:
    """Never writes a tool call."""

    name = "babble"

    def generate(
        self, conversations: Sequence[list[dict[str, Any]]], tools: Sequence[list[dict[str, Any]]]
    ) -> list[Completion]:
        return [Completion('I am thinking about it... {"name": ') for _ in conversations]


def test_chat_engine_fakes__satisfy_the_protocol() -> None:
    assert isinstance(SolverChatEngine(), ChatEngine)
    assert isinstance(BabblingEngine(), ChatEngine)


def test_run_episodes__scripted_record_has_every_field_and_is_json() -> None:
    (record,) = run_episodes([EpisodeSpec.of("meal", instance_index=9, seed=4)], ExactSolver())
    assert set(record) == RECORD_KEYS
    assert json.loads(json.dumps(record)) == record
    assert record["score"] == 1 and record["terminated"] and record["instance_id"] == "meal_r5_c5_h5_b4"
    assert record["messages"][0]["role"] == "system" and record["messages"][1]["role"] == "user"
    assert record["usage"]["turns"] == record["usage"]["tool_calls"] == len(record["turns"])
    assert record["turns"][-1]["reward"] == 1.0 and sum(t["reward"] for t in record["turns"]) == 1.0
    # every assistant call is answered by a tool message with the same id
    calls = [m["tool_calls"][0]["id"] for m in record["messages"] if m["role"] == "assistant"]
    replies = [m["tool_call_id"] for m in record["messages"] if m["role"] == "tool"]
    assert calls == replies


def test_score__is_one_float_type_in_env_info_budget_info_records_and_summary() -> None:
    from ace_gym.eval.summary import summarize
    from ace_gym.wrappers import StepBudget

    specs = [EpisodeSpec.of("meal", instance_index=9), EpisodeSpec.of("shopping", instance_index=34, max_turns=5)]
    solved, truncated = sorted(run_episodes(specs, ExactSolver(), batch_size=2), key=lambda r: r["domain"])
    scores = [solved["score"], truncated["score"], solved["turns"][-1]["info"]["score"]]
    assert scores == [1.0, 0.0, 1.0] and all(type(score) is float for score in scores)
    chat = StepBudget(ChatAdapter(AceEnv("course")), max_turns=1)
    chat.reset(seed=0)
    info = chat.step('<tool_call>{"name": "get_current_grid_state", "arguments": {}}</tool_call>')[4]
    assert info["budget_exhausted"] and type(info["score"]) is float
    summary = summarize([{**solved, "policy": "p"}, {**truncated, "policy": "p"}])
    assert type(summary["overall"]["score"]) is float


def test_run_episodes__group_members_share_instance_and_seed() -> None:
    specs = EpisodeSpec.of("course", seed=17).group(4)  # instance drawn from the seed
    records = list(run_episodes(specs, ExactSolver(), batch_size=4))
    assert len({r["instance_id"] for r in records}) == 1
    assert {r["seed"] for r in records} == {17}
    assert sorted(r["trial"] for r in records) == [0, 1, 2, 3]
    assert len({r["key"] for r in records}) == 4


def test_run_episodes__scripted_max_turns_truncates_with_a_score() -> None:
    (record,) = run_episodes([EpisodeSpec.of("shopping", instance_index=34, max_turns=5)], ExactSolver())
    assert record["truncated"] and not record["terminated"]
    assert record["usage"]["turns"] == 5 and record["score"] == 0 and record["reason"]


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_run_episodes__solver_survives_injected_tool_failures(domain: str) -> None:
    specs = [EpisodeSpec.of(domain, instance_index=i, tool_failure_rate=0.2, seed=i) for i in (3, 17, 33)]
    records = list(run_episodes(specs, ExactSolver(), batch_size=3))
    assert [r["score"] for r in records] == [1, 1, 1]
    calls = [call for r in records for t in r["turns"] for call in t["info"]["calls"]]
    injected = sum(call.get("failure_injected", False) for call in calls)
    assert injected > 0


def test_run_episodes__scripted_and_chat_policies_get_one_record_shape() -> None:
    """A scripted policy acts through the adapter like an engine: same messages, call ids and turn info."""
    spec = EpisodeSpec.of("meal", instance_index=9, seed=4, tool_failure_rate=0.2)
    (scripted,) = run_episodes([spec], ExactSolver())
    (chat,) = run_episodes([spec], SolverChatEngine())
    assert scripted["score"] == chat["score"] == 1.0 and scripted["usage"]["turns"] == chat["usage"]["turns"]
    tool_messages = [m for m in scripted["messages"] if m["role"] == "tool"]
    assert tool_messages == [m for m in chat["messages"] if m["role"] == "tool"]
    assistant = [m for m in scripted["messages"] if m["role"] == "assistant"]
    assert all(m["content"] == "" and len(m["tool_calls"]) == 1 for m in assistant)
    assert [m["tool_calls"][0]["id"] for m in assistant] == [f"call_{turn}_0" for turn in range(1, len(assistant) + 1)]
    infos = [{**t["info"], "tool_format": None} for t in scripted["turns"]]
    assert infos == [{**t["info"], "tool_format": None} for t in chat["turns"]]  # native calls vs Hermes text
    assert {t["info"]["tool_format"] for t in scripted["turns"]} == {"openai"}
    assert set(scripted["usage"]) == set(chat["usage"]) and scripted["env_config"] == chat["env_config"]


def test_run_episodes__chat_engine_gets_all_active_conversations_in_one_call() -> None:
    engine = SolverChatEngine()
    specs = [EpisodeSpec.of("travel", instance_index=i) for i in range(0, 35, 5)]  # 7 episodes
    records = list(run_episodes(specs, engine, batch_size=5))
    assert sorted(r["instance_index"] for r in records) == list(range(0, 35, 5))
    assert all(r["score"] == 1 for r in records)
    assert engine.batch_sizes[0] == 5 and max(engine.batch_sizes) == 5
    total_turns = sum(r["usage"]["turns"] for r in records)
    assert sum(engine.batch_sizes) == total_turns  # one completion per episode turn, nothing else


def test_run_episodes__chat_record_keeps_token_ids_usage_and_reasoning() -> None:
    (record,) = run_episodes(
        [EpisodeSpec.of("workforce", instance_index=16, tool_failure_rate=0.1)], SolverChatEngine()
    )
    assert set(record) == RECORD_KEYS and record["score"] == 1
    assert json.loads(json.dumps(record)) == record
    turns = record["turns"]
    assert all(t["completion_token_ids"] == [1, 2, 3, 4, 5, 6, 7] and "prompt_token_ids" in t for t in turns)
    assert record["usage"]["completion_tokens"] == 7 * len(turns)
    assert record["usage"]["prompt_tokens"] == sum(t["prompt_tokens"] for t in turns)
    assistant = [m for m in record["messages"] if m["role"] == "assistant"]
    assert len(assistant) == len(turns) and assistant[0]["reasoning_content"].startswith("turn")
    assert "messages" not in turns[0]["info"]  # the conversation is stored once, not per turn


def test_run_episodes__babbling_engine_hits_max_turns_without_crashing() -> None:
    records = list(
        run_episodes([EpisodeSpec.of("pc_build", instance_index=i, max_turns=4) for i in range(3)], BabblingEngine())
    )
    assert [r["truncated"] for r in records] == [True] * 3
    assert all(r["score"] == 0 and r["usage"]["turns"] == 4 and r["usage"]["tool_calls"] == 0 for r in records)
    corrections = [m for m in records[0]["messages"] if m["role"] == "user"][1:]
    assert len(corrections) == 4


def test_run_episodes__rejects_a_non_policy_and_bad_batch_size() -> None:
    with pytest.raises(ConfigError):
        list(run_episodes([EpisodeSpec.of("course")], object()))  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        list(run_episodes([EpisodeSpec.of("course")], ExactSolver(), batch_size=0))


def test_episode_spec__takes_numpy_integers_as_plain_ones_and_refuses_bools() -> None:
    spec = EpisodeSpec.of("course", instance_index=np.int64(3), max_turns=np.int64(5))
    assert dict(spec.stack.wrappers)["step_budget"] == {"max_turns": 5} and type(spec.instance_index) is int
    assert spec.key("p") == EpisodeSpec.of("course", instance_index=3, max_turns=5).key("p")
    assert len(spec.group(np.int32(3))) == 3
    with pytest.raises(ConfigError):
        EpisodeSpec.of("course", max_turns=True)  # type: ignore[arg-type]


def test_episode_spec__key_separates_every_setting() -> None:
    base = EpisodeSpec.of("course", instance_id="course_r5_c5_h1_b0")
    variants = [
        base,
        EpisodeSpec.of("course", instance_id="course_r5_c5_h1_b2"),
        EpisodeSpec.of("course", instance_id="course_r5_c5_h1_b0", seed=1),
        EpisodeSpec.of("course", instance_id="course_r5_c5_h1_b0", trial=1),
        EpisodeSpec.of("course", instance_id="course_r5_c5_h1_b0", tool_failure_rate=0.1),
        EpisodeSpec.of("course", instance_id="course_r5_c5_h1_b0", env_kwargs={"extra_query_num": 2}),
        EpisodeSpec.of("course", instance_id="course_r5_c5_h1_b0", max_turns=50),
        EpisodeSpec.of("course", "other.json", instance_id="course_r5_c5_h1_b0"),
    ]
    keys = {spec.key("solver") for spec in variants} | {base.key("greedy")}
    assert len(keys) == len(variants) + 1
    with pytest.raises(ConfigError):
        EpisodeSpec.of("course", env_kwargs={"max_steps": 3})


@pytest.mark.parametrize(
    ("mode", "kwargs"),
    [("sync", {}), ("async", {}), ("async", {"shared_memory": False})],
    ids=["sync", "async", "pipes"],
)
def test_run_vector_episodes__collects_autoreset_episodes_from_make_vec(mode: str, kwargs: dict) -> None:
    envs = gym.make_vec(
        "ACE-meal-v0", num_envs=3, vectorization_mode=mode, vector_kwargs=kwargs, wrappers=[ChatAdapter]
    )
    engine = SolverChatEngine()
    try:
        records = list(run_vector_episodes(envs, engine, num_episodes=5, seed=3))
    finally:
        envs.close()
    assert len(records) == 5 and all(r["score"] == 1 for r in records)
    assert len({r["key"] for r in records}) == 5
    assert engine.batch_sizes[0] == 3 and max(engine.batch_sizes) == 3
    assert all(r["domain"] == "meal" and r["instance_id"].startswith("meal_") for r in records)
    assert all(json.loads(json.dumps(r)) == r for r in records)  # batched infos hold numpy scalars
    for record in records:  # the conversation, grown turn by turn from the adapter's view of it
        roles = [m["role"] for m in record["messages"]]
        assert roles[:2] == ["system", "user"] and roles.count("assistant") == record["usage"]["turns"]
        assert all(roles[i + 1] == "tool" for i, role in enumerate(roles) if role == "assistant")


def test_run_vector_episodes__plays_a_scripted_policy_like_run_episodes() -> None:
    envs = gym.vector.SyncVectorEnv([lambda: StepBudget(ChatAdapter(AceEnv("course")), 200) for _ in range(2)])
    records = list(run_vector_episodes(envs, ExactSolver(), num_episodes=3, seed=5))
    assert len(records) == 3 and all(r["score"] == 1.0 and r["policy"] == "solver" for r in records)
    (alone,) = run_episodes(
        [EpisodeSpec.of("course", instance_id=records[0]["instance_id"], max_turns=200)], ExactSolver()
    )
    assert [m for m in alone["messages"] if m["role"] != "system"] == [
        m for m in records[0]["messages"] if m["role"] != "system"
    ]


def test_run_vector_episodes__same_seed_same_instances() -> None:
    def instances() -> list[str]:
        envs = gym.vector.SyncVectorEnv([lambda: ChatAdapter(AceEnv("travel")) for _ in range(2)])
        records = list(run_vector_episodes(envs, SolverChatEngine(), num_episodes=4, seed=9))
        return sorted(r["instance_id"] for r in records)

    assert instances() == instances()


def test_run_env_episodes__one_env_seeded_s_plus_i_plays_the_instances_of_vector_sub_env_i() -> None:
    envs = gym.vector.SyncVectorEnv([lambda: ChatAdapter(AceEnv("travel")) for _ in range(2)])
    vector = {r["instance_id"] for r in run_vector_episodes(envs, SolverChatEngine(), num_episodes=6, seed=9)}
    singles = [
        list(run_env_episodes(ChatAdapter(AceEnv("travel")), SolverChatEngine(), num_episodes=6, seed=seed))
        for seed in (9, 10)
    ]
    assert vector <= {r["instance_id"] for records in singles for r in records}
    assert {singles[0][0]["instance_id"], singles[1][0]["instance_id"]} <= vector  # both sub-envs' first episodes
    assert [r["key"] for r in singles[0]] == [f"solver-chat|env|{n}" for n in range(6)]
    assert all(r["score"] == 1.0 for records in singles for r in records)  # the env stays open between episodes


def test_run_vector_episodes__refuses_other_autoreset_modes() -> None:
    envs = gym.make_vec(
        "ACE-course-v0",
        num_envs=2,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
        wrappers=[ChatAdapter],
    )
    with pytest.raises(ConfigError):
        next(run_vector_episodes(envs, SolverChatEngine(), num_episodes=1))


def _reuse_specs() -> list[EpisodeSpec]:
    """Specs of every stack kind :meth:`EpisodeSpec.of` builds, three episodes each (other
    instances, seeds and trials), so that a rollout of batch size 1 plays each stack three times."""
    stacks: list[dict[str, Any]] = [
        {"domain": "course"},
        {"domain": "meal", "tool_failure_rate": 0.3},
        {
            "domain": "travel",
            "tool_failure_rate": 0.2,
            "failure_injection": {"failure_modes": ["timeout", "truncated"], "rng": "python"},
        },
        {"domain": "course", "env_kwargs": {"extra_query_num": 2, "global_check_alpha": 0.5}, "max_turns": 12},
        {"domain": "shopping", "settings": ("cost", "extraneous", "unsolvable", "broken", "refine"), "max_turns": 40},
        {"domain": "meal", "scenario": {"stages": 2}, "max_turns": 60},
        {"domain": "travel", "feedback_rounds": {"max_attempts": 2}, "max_turns": 60},
    ]
    return [
        EpisodeSpec.of(**stack, instance_index=k + 1, seed=7 * k + 1, trial=k % 2) for stack in stacks for k in range(3)
    ]


@pytest.mark.parametrize("policy", ["random", "solver"])
def test_run_episodes__a_stack_played_again_gives_the_records_of_new_stacks(policy: str) -> None:
    specs = _reuse_specs()
    reused = list(run_episodes(specs, make_policy(policy), batch_size=1))  # each episode takes its predecessor's stack
    fresh = list(run_episodes(specs, make_policy(policy), batch_size=len(specs)))  # every stack opened before one ends

    def text(record: dict[str, Any]) -> str:  # read after the whole rollout: a record sharing live env state shows
        usage = {k: v for k, v in record["usage"].items() if k not in WALL_CLOCK_USAGE}
        return json.dumps({**record, "usage": usage}, sort_keys=True)

    assert [text(r) for r in reused] == [text(r) for r in sorted(fresh, key=lambda r: specs.index(_spec_of(r)))]


def _spec_of(record: dict[str, Any]) -> EpisodeSpec:
    return EpisodeSpec.from_json(json.dumps(record["replay"]["spec"]))


def test_run_episodes__hashes_each_dataset_file_once_per_rollout_and_records_its_hash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hashed: list[tuple[str, str]] = []

    def counting_sha256(dataset: str, domain: str) -> str:
        hashed.append((dataset, domain))
        return dataset_sha256(dataset, domain)

    monkeypatch.setattr(rollout, "dataset_sha256", counting_sha256)
    specs = [EpisodeSpec.of(domain, instance_index=k, seed=k) for domain in ("course", "meal") for k in range(3)]
    records = list(run_episodes(specs, make_policy("random"), batch_size=2))
    assert sorted(hashed) == [("5x5", "course"), ("5x5", "meal")]
    for record in records:
        assert record["replay"]["dataset_sha256"] == dataset_sha256("5x5", record["domain"])


class SurrogateEngine:
    """Writes lone surrogates everywhere a model can: prose, a call's name and arguments, native
    tool calls, the finish reason."""

    name = "surrogates"

    def generate(
        self, conversations: Sequence[list[dict[str, Any]]], tools: Sequence[list[dict[str, Any]]]
    ) -> list[Completion]:
        text = 'hi \ud800 <tool_call>{"name": "get_slot_id\udfff", "arguments": {"row": "\udc00"}}</tool_call>'
        native = [{"id": "c\ud801", "type": "function", "function": {"name": "done\ud802", "arguments": '{"x": 1}'}}]
        return [
            Completion(text, finish_reason="stop\udbff") if len(c) % 2 else Completion("\ud83d", tool_calls=native)
            for c in conversations
        ]


def test_run_episodes__a_models_lone_surrogates_leave_no_record_field_unencodable() -> None:
    """Issue 40: ``turns[k].action`` kept them (the messages were cleaned): no UTF-8 JSON."""
    orjson = pytest.importorskip("orjson")
    (record,) = run_episodes([EpisodeSpec.of("course", instance_index=0, max_turns=4)], SurrogateEngine())
    assert len(record["turns"]) == 4
    encoded = orjson.dumps(record)  # raises on a lone surrogate
    assert b"\xef\xbf\xbd" in encoded  # U+FFFD where each one was
    assert json.dumps(record, ensure_ascii=False).encode("utf-8")
    assert replay_record(json.loads(encoded)) is None  # the cleaned actions play the same episode


BAD_SPEC_FIELDS = [
    ({"env_kwargs": {"extra_query_nm": 2}}, r"env_kwargs\['extra_query_nm'\].*did you mean 'extra_query_num'"),
    ({"env_kwargs": {"max_steps": 9}}, "env_kwargs.*max_turns"),
    ({"env_kwargs": [("extra_query_num", 1)]}, "env_kwargs"),
    ({"seed": -1}, "seed=-1"),
    ({"seed": 1.5}, "seed=1.5"),
    ({"trial": -2}, "trial=-2"),
    ({"instance_index": -1}, "instance_index=-1"),
    ({"instance_id": 7}, "instance_id=7"),
    ({"tool_failure_rate": float("nan")}, "tool_failure_rate=nan"),
    ({"tool_failure_rate": 1.5}, "tool_failure_rate=1.5"),
    ({"tool_failure_rate": "0.1"}, "tool_failure_rate='0.1'"),
    ({"dataset": None}, "dataset=None"),
]


@pytest.mark.parametrize(("fields", "named"), BAD_SPEC_FIELDS)
def test_episode_spec__a_field_no_episode_plays_is_a_config_error_naming_it(fields: dict, named: str) -> None:
    """Issue 40: unknown env_kwargs raised TypeError at make_env, seed=-1 a raw gymnasium error, and
    a NaN rate played without failures under a key saying ``fail=nan``."""
    with pytest.raises(ConfigError, match=named):
        EpisodeSpec.of("course", **fields)


def test_episode_spec__trial_reaches_the_failure_draws_and_a_group_fails_independently() -> None:
    spec = EpisodeSpec.of("course", instance_index=0, tool_failure_rate=0.5, max_turns=12)
    assert spec.reset_options() == {"instance_index": 0}
    assert spec.group(3)[2].reset_options() == {"instance_index": 0, "trial": 2}
    records = list(run_episodes(spec.group(3), ExactSolver()))
    patterns = {tuple(t["info"]["calls"][0].get("failure_injected") for t in r["turns"]) for r in records}
    assert len(patterns) == 3

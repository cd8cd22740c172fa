"""Batched rollouts: run episodes with a scripted policy or a chat engine, one JSON record each.

:func:`run_episodes` takes :class:`EpisodeSpec` s and a policy and yields one record per finished
episode (in finishing order). Up to ``batch_size`` episodes run at once; when one finishes the
next spec takes its place.

* A :class:`~ace_gym.agents.ScriptedPolicy` plays the core env (one tool call per turn), wrapped
  in :class:`~ace_gym.wrappers.ToolFailureInjection` when the spec's failure rate is > 0; the
  spec's ``max_turns`` becomes the env's ``max_steps``.
* A :class:`~ace_gym.agents.ChatEngine` plays
  ``StepBudget(ChatAdapter(ToolFailureInjection(AceEnv)), max_turns)``: every turn, the
  conversations of all active episodes go to ``engine.generate`` in one call.

:func:`run_vector_episodes` drives a Gymnasium vector env over the adapter (``gym.make_vec`` /
``SyncVectorEnv`` / ``AsyncVectorEnv``, next-step autoreset) with a chat engine the same way.

A record (JSON-serialisable) holds: ``key``, ``policy``, the spec (``dataset``, ``domain``,
``instance_id``, ``instance_index``, ``seed``, ``trial``, ``tool_failure_rate``, ``env_config``,
``max_turns``), ``hidden_slots``, ``decoy_budget``, ``score`` (0.0/1.0), ``reason``, ``terminated``,
``truncated``, ``grid``, ``messages`` (OpenAI chat format, scripted calls included), ``tools``,
``turns`` (per turn: ``reward``, ``info`` and, when the engine reports them, token counts and
``prompt_token_ids`` / ``completion_token_ids`` / ``finish_reason``), ``usage`` (``turns``,
``tool_calls``, ``prompt_tokens``, ``completion_tokens``, ``time_s``, ``env_s``,
``generation_s``: wall time from reset to the end of the episode -- with batching it includes
the batch mates' work --, the episode's own env/adapter time, and the time of the policy calls
it took part in), ``notes`` (what a scripted policy reports). Members of a GRPO-style group
share instance and seed and differ in ``trial``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from ace_gym.agents.base import ChatEngine, Completion, ScriptedEpisode, ScriptedPolicy
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError
from ace_gym.wrappers import ChatAdapter, StepBudget, ToolFailureInjection

DEFAULT_MAX_TURNS = 1000
"""Turn limit of chat episodes without one (the published loop's ``max_steps``)."""
_INFO_DROPPED = ("messages", "system_prompt", "tools")  # stored once per record, not per turn


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to run: which instance, under which seed, failure rate and env settings.

    Exactly one of ``instance_index`` / ``instance_id`` picks the instance (neither: the env
    draws it from ``seed``). ``env_kwargs`` are :class:`~ace_gym.envs.AceEnv` keyword arguments
    (budgets: ``extra_query_num``, ``global_check_alpha``, ``check_include_reason``,
    ``max_query_ids``, ``max_query_fields``). ``max_turns`` bounds policy turns (tool calls for
    scripted policies, assistant messages for chat engines).
    """

    domain: str
    dataset: str = "5x5"
    instance_index: int | None = None
    instance_id: str | None = None
    seed: int = 0
    trial: int = 0
    tool_failure_rate: float = 0.0
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    max_turns: int | None = None

    def __post_init__(self) -> None:
        if "max_steps" in self.env_kwargs:
            raise ConfigError("env_kwargs", dict(self.env_kwargs), "use max_turns, not max_steps")
        if self.max_turns is not None and (type(self.max_turns) is not int or self.max_turns < 1):
            raise ConfigError("max_turns", self.max_turns, "must be a positive integer or None")

    def key(self, policy: str) -> str:
        """The identity of this episode under ``policy`` (resume skips episodes whose key exists)."""
        instance = self.instance_id if self.instance_id is not None else f"#{self.instance_index}"
        config = json.dumps({**dict(self.env_kwargs), "max_turns": self.max_turns}, sort_keys=True)
        return (
            f"{policy}|{self.dataset}|{self.domain}|{instance}|fail={self.tool_failure_rate:g}"
            f"|trial={self.trial}|seed={self.seed}|{config}"
        )

    def group(self, size: int) -> list[EpisodeSpec]:
        """``size`` copies of this spec with trials 0..size-1: a GRPO-style group (same instance,
        seed and settings; members differ only in the policy's sampling)."""
        if type(size) is not int or size < 1:
            raise ConfigError("group size", size, "must be a positive integer")
        return [dataclasses.replace(self, trial=trial) for trial in range(size)]

    def reset_options(self) -> dict[str, Any]:
        if self.instance_id is not None:
            return {"instance_id": self.instance_id}
        if self.instance_index is not None:
            return {"instance_index": self.instance_index}
        return {}

    def make_core_env(self, max_steps: int | None = None) -> gym.Env:
        """The core env for this spec, wrapped in failure injection when the rate is > 0."""
        kwargs = dict(self.env_kwargs)
        if max_steps is not None:
            kwargs["max_steps"] = max_steps
        env: gym.Env = AceEnv(self.domain, self.dataset, **kwargs)
        return ToolFailureInjection(env, self.tool_failure_rate) if self.tool_failure_rate > 0 else env

    def make_chat_env(self) -> gym.Env:
        """``StepBudget(ChatAdapter(core env), max_turns)``."""
        return StepBudget(ChatAdapter(self.make_core_env()), self.max_turns or DEFAULT_MAX_TURNS)


def policy_name(policy: ScriptedPolicy | ChatEngine) -> str:
    """How a policy is named in records: its ``name`` attribute, else its class name."""
    return str(getattr(policy, "name", None) or type(policy).__name__)


def run_episodes(
    specs: Iterable[EpisodeSpec],
    policy: ScriptedPolicy | ChatEngine,
    *,
    batch_size: int = 32,
    name: str | None = None,
) -> Iterator[dict[str, Any]]:
    """Run every spec with ``policy``, ``batch_size`` episodes at a time; yield each finished
    episode's record (see the module docstring). ``name`` overrides the policy name in keys."""
    if type(batch_size) is not int or batch_size < 1:
        raise ConfigError("batch_size", batch_size, "must be a positive integer")
    label = name or policy_name(policy)
    if isinstance(policy, ScriptedPolicy):
        return _run_scripted(iter(specs), policy, batch_size, label)
    if isinstance(policy, ChatEngine):
        return _run_chat(iter(specs), policy, batch_size, label)
    raise ConfigError("policy", policy, "must be a ScriptedPolicy or a ChatEngine (has generate())")


# ------------------------------------------------------------------------------------------
# episode bookkeeping shared by both paths


class _Episode:
    """A running episode: its env (None when a vector env owns it), conversation, per-turn log
    and usage counters."""

    def __init__(self, spec: EpisodeSpec | None, key: str, policy: str, env: Any) -> None:
        self.spec, self.key, self.policy, self.env = spec, key, policy, env
        self.start = time.perf_counter()
        self.messages: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] = []
        self.reset_info: dict[str, Any] = {}
        self.turns: list[dict[str, Any]] = []
        self.usage = {
            "turns": 0,
            "tool_calls": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "time_s": 0.0,
            "env_s": 0.0,
            "generation_s": 0.0,
        }
        self.scripted: ScriptedEpisode | None = None
        self.last_observation: str = ""

    def begin(self, messages: list[dict[str, Any]], info: dict[str, Any]) -> None:
        self.messages = messages
        self.tools = info.get("tools", [])
        self.reset_info = {k: v for k, v in info.items() if k not in _INFO_DROPPED}

    def extend_messages(self, info: Mapping[str, Any]) -> None:
        """Append what the adapter's ``info["messages"]`` (the whole conversation, as a view) holds
        beyond the messages already kept: copying only the new turn keeps a turn's cost flat."""
        if "messages" in info:
            self.messages.extend(info["messages"][len(self.messages) :])

    def log_turn(self, reward: float, info: dict[str, Any], completion: Completion | None = None) -> None:
        turn: dict[str, Any] = {
            "reward": float(reward),
            "info": _jsonable({k: v for k, v in info.items() if k not in _INFO_DROPPED}),
        }
        if completion is not None:
            turn.update(
                prompt_tokens=completion.prompt_tokens,
                completion_tokens=completion.completion_tokens,
                finish_reason=completion.finish_reason,
            )
            if completion.prompt_token_ids is not None:
                turn["prompt_token_ids"] = list(completion.prompt_token_ids)
            if completion.completion_token_ids is not None:
                turn["completion_token_ids"] = list(completion.completion_token_ids)
            self.usage["prompt_tokens"] += completion.prompt_tokens
            self.usage["completion_tokens"] += completion.completion_tokens
        self.turns.append(turn)
        self.usage["turns"] += 1

    def finish(self, terminated: bool, truncated: bool, info: Mapping[str, Any]) -> dict[str, Any]:
        self.usage["time_s"] = time.perf_counter() - self.start
        spec = self.spec
        reset = self.reset_info
        record: dict[str, Any] = {
            "key": self.key,
            "policy": self.policy,
            "dataset": spec.dataset if spec else None,
            "domain": spec.domain if spec else reset.get("domain"),
            "instance_id": reset.get("instance_id"),
            "instance_index": reset.get("instance_index"),
            "hidden_slots": reset.get("hidden_slots"),
            "decoy_budget": reset.get("decoy_budget"),
            "seed": spec.seed if spec else None,
            "trial": spec.trial if spec else 0,
            "tool_failure_rate": spec.tool_failure_rate if spec else None,
            "env_config": _jsonable(reset.get("budgets", {})),
            "max_turns": spec.max_turns if spec else None,
            "score": float(info.get("score") or 0.0),
            "reason": info.get("reason"),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "grid": info.get("grid"),
            "usage": self.usage,
            "notes": _jsonable(self.scripted.notes) if self.scripted else {},
            "messages": self.messages,
            "tools": self.tools,
            "turns": self.turns,
        }
        if self.env is not None:
            self.env.close()
        return record


_PLAIN_TYPES = frozenset({str, int, float, bool, type(None)})


def _jsonable(value: Any) -> Any:
    """``value`` with numpy scalars/arrays and tuples turned into plain JSON types."""
    kind = type(value)
    if kind in _PLAIN_TYPES:  # the common case first: this runs over every turn's info
        return value
    if kind is dict:
        return {str(k): _jsonable(v) for k, v in value.items()}
    if kind is list:
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_jsonable(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    return value


# ------------------------------------------------------------------------------------------
# scripted policies on the core env


def _start_scripted(spec: EpisodeSpec, policy: ScriptedPolicy, label: str) -> _Episode:
    episode = _Episode(spec, spec.key(label), label, spec.make_core_env(max_steps=spec.max_turns))
    observation, info = episode.env.reset(seed=spec.seed, options=spec.reset_options())
    episode.begin(
        [{"role": "system", "content": info["system_prompt"]}, {"role": "user", "content": observation}], info
    )
    policy_seed = int(np.random.SeedSequence([spec.seed, spec.trial]).generate_state(1)[0])
    episode.scripted = policy.start(observation, info, policy_seed)
    episode.last_observation = observation
    return episode


def _run_scripted(
    specs: Iterator[EpisodeSpec], policy: ScriptedPolicy, batch_size: int, label: str
) -> Iterator[dict[str, Any]]:
    active: list[_Episode] = []
    exhausted = False
    while True:
        while not exhausted and len(active) < batch_size:
            spec = next(specs, None)
            if spec is None:
                exhausted = True
            else:
                active.append(_start_scripted(spec, policy, label))
        if not active:
            return
        began = time.perf_counter()
        actions = policy.act_batch([e.scripted for e in active], [e.last_observation for e in active])  # type: ignore[misc]
        per_episode_policy_s = (time.perf_counter() - began) / len(active)
        still_active = []
        for episode, action in zip(active, actions, strict=True):
            episode.usage["generation_s"] += per_episode_policy_s
            call_id = f"call_{episode.usage['turns'] + 1}_0"
            episode.messages.append(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": action["name"], "arguments": json.dumps(action["arguments"])},
                        }
                    ],
                }
            )
            began = time.perf_counter()
            observation, reward, terminated, truncated, info = episode.env.step(action)
            episode.usage["env_s"] += time.perf_counter() - began
            episode.usage["tool_calls"] += 1
            episode.messages.append(
                {"role": "tool", "tool_call_id": call_id, "name": action["name"], "content": observation}
            )
            episode.last_observation = observation
            episode.log_turn(float(reward), info)
            if terminated or truncated:
                yield episode.finish(terminated, truncated, info)
            else:
                still_active.append(episode)
        active = still_active


# ------------------------------------------------------------------------------------------
# chat engines over the adapter


def completion_action(completion: Completion) -> str | dict[str, Any]:
    """The adapter action of a completion: its text, or an assistant message when the engine
    parsed tool calls or separated reasoning."""
    if completion.tool_calls is None and completion.reasoning is None:
        return completion.text
    message: dict[str, Any] = {"role": "assistant", "content": completion.text or ""}
    if completion.tool_calls is not None:
        message["tool_calls"] = completion.tool_calls
    if completion.reasoning is not None:
        message["reasoning_content"] = completion.reasoning
    return message


def _generate(engine: ChatEngine, episodes: Sequence[_Episode]) -> list[Completion]:
    began = time.perf_counter()
    completions = engine.generate([e.messages for e in episodes], [e.tools for e in episodes])
    elapsed = time.perf_counter() - began
    if len(completions) != len(episodes):
        raise RuntimeError(f"engine returned {len(completions)} completions for {len(episodes)} conversations")
    for episode in episodes:
        episode.usage["generation_s"] += elapsed
    return completions


def _chat_step(episode: _Episode, completion: Completion) -> tuple[bool, bool, dict[str, Any]]:
    began = time.perf_counter()
    _, reward, terminated, truncated, info = episode.env.step(completion_action(completion))
    episode.usage["env_s"] += time.perf_counter() - began
    episode.usage["tool_calls"] += len(info.get("calls", ()))
    episode.extend_messages(info)
    episode.log_turn(float(reward), info, completion)
    return terminated, truncated, info


def _run_chat(
    specs: Iterator[EpisodeSpec], engine: ChatEngine, batch_size: int, label: str
) -> Iterator[dict[str, Any]]:
    active: list[_Episode] = []
    exhausted = False
    while True:
        while not exhausted and len(active) < batch_size:
            spec = next(specs, None)
            if spec is None:
                exhausted = True
                continue
            episode = _Episode(spec, spec.key(label), label, spec.make_chat_env())
            messages, info = episode.env.reset(seed=spec.seed, options=spec.reset_options())
            episode.begin(list(messages), info)
            active.append(episode)
        if not active:
            return
        completions = _generate(engine, active)
        still_active = []
        for episode, completion in zip(active, completions, strict=True):
            terminated, truncated, info = _chat_step(episode, completion)
            if terminated or truncated:
                yield episode.finish(terminated, truncated, info)
            else:
                still_active.append(episode)
        active = still_active


def run_vector_episodes(
    envs: gym.vector.VectorEnv,
    engine: ChatEngine,
    *,
    num_episodes: int,
    seed: int | None = None,
    name: str | None = None,
) -> Iterator[dict[str, Any]]:
    """Collect ``num_episodes`` episodes from a vector env of chat-adapted ACE envs.

    The vector env must use next-step autoreset (Gymnasium's default): an env that finished is
    reset by the following ``step``, whose action for it is ignored. Every step sends the
    conversations of all envs with a running episode to ``engine.generate`` in one call.
    Episodes get keys ``"<policy>|vector|<n>"`` in start order; ``seed`` seeds the first reset
    (env i gets ``seed + i``), later instances come from each env's own seeded stream.
    """
    mode = envs.metadata.get("autoreset_mode")
    if mode is not None and getattr(mode, "name", str(mode)) != "NEXT_STEP":
        raise ConfigError("autoreset_mode", mode, "run_vector_episodes needs next-step autoreset")
    label = name or policy_name(engine)
    count = envs.num_envs
    started = finished = 0
    episodes: list[_Episode | None] = [None] * count
    resetting = [True] * count  # the next observation of env i starts an episode

    observations, infos = envs.reset(seed=seed)
    rewards = terminations = truncations = np.zeros(count)  # read only after the first step
    completions: list[Completion] = []
    running: list[int] = []
    while True:
        for i in range(count):
            info = _item(infos, i)
            if resetting[i]:
                resetting[i] = False
                if started < num_episodes:
                    episodes[i] = _Episode(None, f"{label}|vector|{started}", label, None)
                    episodes[i].begin(list(observations[i]), info)  # type: ignore[union-attr]
                    started += 1
                continue
            episode = episodes[i]
            if episode is None or i not in running:
                continue
            episode.extend_messages(info)
            episode.usage["tool_calls"] += len(info.get("calls", ()))
            episode.log_turn(float(rewards[i]), info, completions[running.index(i)])
            if terminations[i] or truncations[i]:
                episodes[i] = None
                resetting[i] = True
                finished += 1
                yield episode.finish(bool(terminations[i]), bool(truncations[i]), info)
        if finished >= num_episodes:
            return
        running = [i for i in range(count) if episodes[i] is not None]
        completions = _generate(engine, [e for e in episodes if e is not None]) if running else []
        actions: list[Any] = [""] * count  # envs without a tracked episode: ignored or untracked
        for i, completion in zip(running, completions, strict=True):
            actions[i] = completion_action(completion)
        began = time.perf_counter()
        observations, rewards, terminations, truncations, infos = envs.step(tuple(actions))
        elapsed = (time.perf_counter() - began) / max(1, len(running))
        for i in running:
            episodes[i].usage["env_s"] += elapsed  # type: ignore[union-attr]


def _item(infos: Mapping[str, Any], i: int) -> dict[str, Any]:
    """Env ``i``'s entries of a vector env's batched info dict."""
    out: dict[str, Any] = {}
    for key, values in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get(f"_{key}")
        if mask is not None and not mask[i]:
            continue
        out[key] = _item(values, i) if isinstance(values, Mapping) else _jsonable(values[i])
    return out

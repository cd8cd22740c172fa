"""Batched rollouts of ACE episodes, one JSON record each, with any policy.

:func:`run_episodes` takes :class:`EpisodeSpec` s and a policy and yields one record per finished
episode (in finishing order), through the one rollout loop (:mod:`ace_gym.runs.loop`): up to
``batch_size`` episodes run at once, and when one finishes the next spec takes its place. Every
policy plays ``StepBudget(ChatAdapter(ToolFailureInjection(AceEnv)), max_turns)`` (failure
injection only when the spec's rate is > 0): a :class:`~ace_gym.agents.ScriptedPolicy` one tool
call per turn, as an assistant message with native ``tool_calls``; a
:class:`~ace_gym.agents.ChatEngine` whatever it writes, the conversations of all active episodes
going to ``engine.generate`` in one call per turn.

:func:`run_vector_episodes` drives a Gymnasium vector env over the adapter (``gym.make_vec`` /
``SyncVectorEnv`` / ``AsyncVectorEnv``, next-step autoreset) the same way.

A record (JSON-serialisable) holds: ``key``, ``policy``, the spec (``dataset``, ``domain``,
``instance_id``, ``instance_index``, ``seed``, ``trial``, ``tool_failure_rate``, ``env_config``,
``max_turns``, ``settings``: the planning settings, :mod:`ace_gym.planning.settings`),
``hidden_slots``, ``decoy_budget``, ``curriculum_level`` (the ladder index a
:class:`~ace_gym.wrappers.Curriculum` chose, else None), ``score`` (0.0/1.0), ``reason``, ``terminated``,
``truncated``, ``grid``, ``messages`` (OpenAI chat format, scripted calls included), ``tools``,
``turns`` (per turn: the ``action`` as played, ``reward``, the adapter's ``info`` and, when the
engine reports them, token counts and ``prompt_token_ids`` / ``completion_token_ids`` /
``logprobs`` / ``finish_reason``), ``tokens`` (an engine that generates from token ids, vLLM or
transformers, plays token-exact: ``prompt_ids``, ``response_ids``, ``assistant_mask``,
``logprobs``, ``turn_starts`` as :meth:`~ace_gym.chat_template.ChatTokens.trajectory` lays them
out, the prompt of turn t being ``prompt_ids + response_ids[:turn_starts[t]]``; None for other
policies), ``usage`` (:mod:`ace_gym.runs.loop`), ``notes`` (what a scripted policy reports),
``failures`` (every injected tool failure, whether and in how many turns the agent recovered:
:func:`ace_gym.eval.recovery.failure_log`), ``replay`` (what a replay needs,
:func:`replay_fields`, docs/replay.md), and the fields each benchmark adds
(:meth:`~ace_gym.benchmark.Benchmark.record_fields_of`: under AgencyBench's protocol
``feedback_rounds`` / ``scenario``). Members of a GRPO-style group share
instance and seed and differ in ``trial``.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np

from ace_gym import __version__
from ace_gym.agents.base import Policy
from ace_gym.agents.policies import policy_name
from ace_gym.domains import get_domain
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError, did_you_mean, integer, optional_integer, probability
from ace_gym.eval.recovery import failure_log
from ace_gym.feedback.rounds import ACE_THRESHOLD, TRAINING_REWARD
from ace_gym.feedback.scenario import ScenarioEnv
from ace_gym.instance import dataset_sha256
from ace_gym.planning.settings import check_settings
from ace_gym.registration import register_domain
from ace_gym.runs.loop import Actor, Episode, Turn, actor_of, jsonable, run_loop, token_trajectory
from ace_gym.stacks import BENCHMARKS, WRAPPERS, StackSpec
from ace_gym.wrappers import ToolFailureInjection
from ace_gym.wrappers.step_budget import DEFAULT_MAX_TURNS as DEFAULT_MAX_TURNS  # re-exported: episodes without a limit


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to run: which instance, under which seed, failure rate and env settings.

    Exactly one of ``instance_index`` / ``instance_id`` picks the instance (neither: the env
    draws it from ``seed``). ``env_kwargs`` are :class:`~ace_gym.envs.AceEnv` keyword arguments
    (budgets: ``extra_query_num``, ``global_check_alpha``, ``check_include_reason``,
    ``max_query_ids``, ``max_query_fields``). ``max_turns`` bounds policy turns (assistant
    messages: one tool call each for a scripted policy). AgencyBench's protocol
    (docs/feedback_rounds.md): ``scenario``, keyword arguments of
    :class:`~ace_gym.feedback.scenario.ScenarioEnv` (``stages``, ``max_attempts``, ``threshold``,
    ``feedback``), plays the instance in stages; ``feedback_rounds``, keyword arguments of
    :class:`~ace_gym.feedback.FeedbackRounds`, wraps the episode in feedback rounds (its
    ``threshold`` is filled in with the default, 1.0, when absent, so the key names it).
    ``failure_injection``: keyword arguments of :class:`~ace_gym.wrappers.ToolFailureInjection`
    besides the rate (``failure_modes``, ``tool_rates``, ``rng``); None (the default) injects the
    published failure only. ``context``: keyword arguments of the context policy
    :class:`~ace_gym.wrappers.ContextWindow` (``{"last_turns": 4}``); None (the default) shows the
    model the whole conversation, and the spec's key and JSON are those of a spec without the field.
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
    settings: tuple[str, ...] = ()
    scenario: Mapping[str, Any] | None = None
    feedback_rounds: Mapping[str, Any] | None = None
    failure_injection: Mapping[str, Any] | None = None
    context: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        """ConfigError naming the field for a value no episode can be played with."""
        if not isinstance(self.env_kwargs, Mapping):
            raise ConfigError("env_kwargs", self.env_kwargs, "must map AceEnv keyword arguments to values")
        if "max_steps" in self.env_kwargs:
            raise ConfigError("env_kwargs", dict(self.env_kwargs), "use max_turns, not max_steps")
        unknown = [str(name) for name in self.env_kwargs if name not in _ENV_KWARGS]
        if unknown:
            raise ConfigError(
                f"env_kwargs[{unknown[0]!r}]",
                self.env_kwargs[unknown[0]],
                f"is no AceEnv keyword argument; known: {', '.join(_ENV_KWARGS)}{did_you_mean(unknown[0], _ENV_KWARGS)}",
            )
        if not isinstance(self.domain, str) or not isinstance(self.dataset, str):
            field_name, value = (
                ("domain", self.domain) if not isinstance(self.domain, str) else ("dataset", self.dataset)
            )
            raise ConfigError(field_name, value, "must be a string")
        object.__setattr__(self, "seed", integer("seed", self.seed, minimum=0))
        object.__setattr__(self, "trial", integer("trial", self.trial, minimum=0))
        object.__setattr__(self, "instance_index", optional_integer("instance_index", self.instance_index, minimum=0))
        if self.instance_id is not None and not isinstance(self.instance_id, str):
            raise ConfigError("instance_id", self.instance_id, "must be a string or None")
        object.__setattr__(self, "tool_failure_rate", probability("tool_failure_rate", self.tool_failure_rate))
        object.__setattr__(self, "max_turns", optional_integer("max_turns", self.max_turns, minimum=1))
        object.__setattr__(self, "settings", check_settings(self.settings))
        if self.feedback_rounds is not None and "threshold" not in self.feedback_rounds:
            # the threshold is named in the key: a spec that relied on 0.6, the default until
            # issue 29, never shares a key (and so a resumed run) with one played at 1.0
            object.__setattr__(self, "feedback_rounds", {**self.feedback_rounds, "threshold": ACE_THRESHOLD})
        for name in ("feedback_rounds", "scenario"):
            protocol = getattr(self, name)
            if protocol is not None and "final_reward" not in protocol:
                # named in the key likewise: the rubric's share ("final") was the default reward
                # until issue 38, so a run that relied on it is never resumed with the verdict
                object.__setattr__(self, name, {**protocol, "final_reward": TRAINING_REWARD})

    def key(self, policy: str) -> str:
        """The identity of this episode under ``policy`` (resume skips episodes whose key exists)."""
        instance = self.instance_id if self.instance_id is not None else f"#{self.instance_index}"
        protocol = {name: dict(value) for name, value in self.protocol().items() if value is not None}
        if self.failure_injection is not None:
            protocol["failure_injection"] = dict(self.failure_injection)
        if self.context is not None:
            protocol["context"] = dict(self.context)
        config = json.dumps({**dict(self.env_kwargs), "max_turns": self.max_turns, **protocol}, sort_keys=True)
        settings = f"|settings={','.join(self.settings)}" if self.settings else ""
        return (
            f"{policy}|{self.dataset}|{self.domain}|{instance}|fail={self.tool_failure_rate:g}"
            f"|trial={self.trial}|seed={self.seed}|{config}{settings}"
        )

    def group(self, size: int) -> list[EpisodeSpec]:
        """``size`` copies of this spec with trials 0..size-1: a GRPO-style group (same instance,
        seed and settings; members differ only in the policy's sampling)."""
        return [dataclasses.replace(self, trial=trial) for trial in range(integer("group size", size, minimum=1))]

    def reset_options(self) -> dict[str, Any]:
        """The reset options of this episode: its instance, and its ``trial`` when not 0 (failure
        injection draws from it, :class:`~ace_gym.wrappers.ToolFailureInjection`)."""
        trial = {"trial": self.trial} if self.trial else {}
        if self.instance_id is not None:
            return {"instance_id": self.instance_id, **trial}
        if self.instance_index is not None:
            return {"instance_index": self.instance_index, **trial}
        return trial

    def protocol(self) -> dict[str, Mapping[str, Any] | None]:
        """AgencyBench's settings of this spec (``scenario``, ``feedback_rounds``), None when unused."""
        return {"scenario": self.scenario, "feedback_rounds": self.feedback_rounds}

    def stack(self) -> StackSpec:
        """The env stack this spec plays, as the wrapper registry (:mod:`ace_gym.stacks`) orders
        it: the ``ACE-<domain>-v0`` env (``ACE-<domain>-scenario-v0`` with ``scenario``'s
        arguments when set), failure injection when the rate is > 0 or ``failure_injection`` is
        given, the planning settings with their default arguments, the chat adapter, the context
        policy when ``context`` is set, the turn budget (``max_turns``, else
        :data:`DEFAULT_MAX_TURNS`) and, when ``feedback_rounds`` is set, feedback rounds."""
        get_domain(self.domain)  # an unknown domain is refused as the env refuses it, naming the field
        register_domain(self.domain)  # a domain added after import has its ids too
        env_kwargs = {"domain": self.domain, "dataset": self.dataset, **self.env_kwargs}
        if self.scenario is None:
            env_id = f"ACE-{self.domain}-v0"
        else:
            env_id = f"ACE-{self.domain}-scenario-v0"
            env_kwargs.update(self.scenario)
        layers: list[str | tuple[str, Mapping[str, Any]]] = list(self.settings)
        if self.tool_failure_rate > 0 or self.failure_injection is not None:
            layers.append(("failure_injection", {"rate": self.tool_failure_rate, **(self.failure_injection or {})}))
        # no max_turns: the budget's default (DEFAULT_MAX_TURNS), so from_stack gives None back
        budget = {} if self.max_turns is None else {"max_turns": self.max_turns}
        layers.append(("chat_adapter", {}))
        if self.context is not None:
            layers.append(("context_window", dict(self.context)))
        layers.append(("step_budget", budget))
        if self.feedback_rounds is not None:
            layers.append(("feedback_rounds", dict(self.feedback_rounds)))
        return StackSpec.of(env_id, env_kwargs, layers)

    @classmethod
    def from_stack(
        cls,
        stack: StackSpec,
        *,
        instance_index: int | None = None,
        instance_id: str | None = None,
        seed: int = 0,
        trial: int = 0,
    ) -> EpisodeSpec:
        """The spec playing ``stack`` (one :meth:`stack` builds: an ACE or scenario env id, the
        chat adapter and turn budget, the settings with their default arguments) on the instance,
        seed and trial given; ConfigError naming what this spec cannot express.
        ``EpisodeSpec.from_stack(spec.stack(), ...)`` is ``spec`` again, but for an empty
        ``failure_injection`` at a rate > 0, whose stack is None's (both build the same env): it
        comes back None."""
        return cls(
            **_fields_of_stack(stack), instance_index=instance_index, instance_id=instance_id, seed=seed, trial=trial
        )

    def make_core_env(self) -> gym.Env:
        """The tool-call env under the chat adapter: :meth:`stack` below ``chat_adapter``. The core
        env carries the spec of its registered id with this spec's keyword arguments, so
        ``env.spec`` of any stack built on it names the whole stack (``gym.make(env.spec)`` rebuilds it)."""
        return self.stack().below("chat_adapter").make()

    def make_env(self) -> gym.Env:
        """The env every policy plays: :meth:`stack` made (``StepBudget(ChatAdapter(core env),
        max_turns)``, inside ``FeedbackRounds`` when ``feedback_rounds`` is set)."""
        return self.stack().make()

    def opening(self) -> list[dict[str, str]]:
        """The episode's opening ``[system, user]`` messages (``role`` and ``content``), as
        :meth:`make_env` starts it: what a trainer's dataset row shows as the prompt."""
        env = self.make_env()
        messages, _ = env.reset(seed=self.seed, options=self.reset_options())
        env.close()
        return [{"role": m["role"], "content": m["content"]} for m in messages]

    def to_json(self) -> str:
        """The spec as JSON text (:meth:`from_json` reads it back): how a trainer's dataset row
        names the episode it plays."""
        return _fields_json(self, _SPEC_FIELDS)

    @classmethod
    def from_json(cls, text: str) -> EpisodeSpec:
        """The spec :meth:`to_json` wrote; ConfigError for text that is no such spec."""
        try:
            return cls(**json.loads(text))
        except (TypeError, ValueError) as error:
            if isinstance(error, ConfigError):
                raise
            raise ConfigError("episode", text[:200], f"is not an EpisodeSpec as JSON ({error})") from None

    def policy_seed(self) -> int:
        """The seed of a scripted policy's own draws: a function of ``seed`` and ``trial``."""
        return int(np.random.SeedSequence([self.seed, self.trial]).generate_state(1)[0])


_ENV_KWARGS = tuple(
    name for name in inspect.signature(AceEnv).parameters if name not in ("domain", "dataset", "source", "max_steps")
)
"""The AceEnv keyword arguments an EpisodeSpec's ``env_kwargs`` may hold (its turn limit is ``max_turns``)."""


def _fields_of_stack(stack: StackSpec) -> dict[str, Any]:
    """The :class:`EpisodeSpec` fields (but the instance, seed and trial) of a stack
    :meth:`EpisodeSpec.stack` could have built; ConfigError naming the part it could not."""
    env_kwargs = dict(stack.env_kwargs)
    domain, dataset = env_kwargs.pop("domain", None), env_kwargs.pop("dataset", "5x5")
    fields: dict[str, Any] = {"domain": domain, "dataset": dataset, "settings": (), "scenario": None}
    if stack.env_id == f"ACE-{domain}-scenario-v0":
        scenario_keys = set(inspect.signature(ScenarioEnv).parameters) - set(inspect.signature(AceEnv).parameters)
        fields["scenario"] = {k: env_kwargs.pop(k) for k in list(env_kwargs) if k in scenario_keys}
    elif stack.env_id != f"ACE-{domain}-v0":
        raise ConfigError("env_id", stack.env_id, "an EpisodeSpec plays ACE-<domain>-v0 or ACE-<domain>-scenario-v0")
    fields["env_kwargs"] = env_kwargs
    layers = dict(stack.wrappers)
    if len(layers) != len(stack.wrappers) or [n for n, _ in stack.wrappers] != [n for n in WRAPPERS if n in layers]:
        raise ConfigError(
            "wrappers", [n for n, _ in stack.wrappers], "an EpisodeSpec stacks each wrapper once, in registry order"
        )
    if "failure_injection" in layers:
        options = dict(layers.pop("failure_injection"))
        fields["tool_failure_rate"] = rate = options.pop("rate", 0.0)
        # a rate > 0 alone needs no options; at rate 0 the layer is there for its options, even {}
        fields["failure_injection"] = options if options or rate == 0 else None
    if layers.pop("chat_adapter", None) != {} or "step_budget" not in layers:
        raise ConfigError(
            "wrappers",
            [n for n, _ in stack.wrappers],
            "an EpisodeSpec plays chat_adapter (no arguments) and step_budget",
        )
    if "context_window" in layers:
        fields["context"] = dict(layers.pop("context_window"))
    budget = dict(layers.pop("step_budget"))
    fields["max_turns"] = budget.pop("max_turns", None)
    if budget:
        raise ConfigError("wrappers.step_budget", budget, "an EpisodeSpec sets max_turns only")
    if "feedback_rounds" in layers:
        fields["feedback_rounds"] = dict(layers.pop("feedback_rounds"))
    for name, kwargs in layers.items():
        entry = WRAPPERS[name]
        if not entry.setting or dict(kwargs) != dict(entry.defaults):
            raise ConfigError(
                f"wrappers.{name}",
                dict(kwargs),
                "an EpisodeSpec holds planning settings with their default arguments only",
            )
        fields["settings"] += (name,)
    return fields


def run_episodes(
    specs: Iterable[EpisodeSpec],
    policy: Policy | Actor,
    *,
    batch_size: int = 32,
    name: str | None = None,
) -> Iterator[dict[str, Any]]:
    """Run every spec with ``policy`` (or an :class:`~ace_gym.runs.loop.Actor` of one's own),
    ``batch_size`` episodes at a time; yield each finished episode's record (see the module
    docstring). ``name`` overrides the policy name in keys. An engine that cannot reach or load
    its model raises :class:`~ace_gym.errors.EngineUnavailableError` from the iterator: the
    episodes then running yield no record."""
    label = name or policy_name(policy)
    stacks = _IdleStacks()
    opener = partial(_open, label=label, stacks=stacks, digests={})
    return stacks.closing(run_loop(specs, opener, actor_of(policy), batch_size))


def _open(
    spec: EpisodeSpec, label: str, stacks: _IdleStacks, digests: dict[tuple[str, str], str]
) -> tuple[Episode, Any, dict[str, Any]]:
    stack_key = _stack_key(spec)  # once per episode: the idle stacks and the record's replay fields need it
    env, release = stacks.take(spec, stack_key)
    record = partial(ace_record, spec, stack_key=stack_key, dataset_digest=_dataset_digest(spec, digests))
    episode = Episode(spec.key(label), label, env, record, policy_seed=spec.policy_seed, release=release)
    observation, info = episode.reset(seed=spec.seed, options=spec.reset_options())
    return episode, observation, info


class _IdleStacks:
    """The env stacks of finished episodes, each played again by the next episode of an equal
    stack (:func:`_stack_key`) instead of building a new one: an episode always resets its stack
    with its spec's seed and options, and every layer :meth:`EpisodeSpec.make_env` builds starts
    over from that reset (its RNG reseeded, its counters and logs new), so a reused stack plays
    the episode a new one would. A subclass of :class:`EpisodeSpec` may build its stack from any
    field: its episodes get new stacks. Idle stacks are closed when the rollout ends."""

    def __init__(self) -> None:
        self._idle: dict[str, list[gym.Env]] = {}

    def take(self, spec: EpisodeSpec, key: str) -> tuple[gym.Env, Callable[[gym.Env], None] | None]:
        """A stack for ``spec`` (whose :func:`_stack_key` is ``key``) and what its episode calls
        with it when it ends (None: close it)."""
        if type(spec) is not EpisodeSpec:
            return spec.make_env(), None
        idle = self._idle.get(key)
        return (idle.pop() if idle else spec.make_env()), partial(self._keep, key)

    def _keep(self, key: str, env: gym.Env) -> None:
        self._idle.setdefault(key, []).append(env)

    def closing(self, records: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """``records``, then (or when the caller stops early) every idle stack closed."""
        try:
            yield from records
        finally:
            for env in (env for envs in self._idle.values() for env in envs):
                env.close()
            self._idle.clear()


def _dataset_digest(spec: EpisodeSpec, digests: dict[tuple[str, str], str]) -> str:
    """:func:`~ace_gym.instance.dataset_sha256` of the spec's dataset, hashed once per rollout
    (``digests``, one rollout's): resolving the file again for every episode cost more than a
    turn of it. The rollout's env stacks load their dataset once, when built; a file rewritten
    while a rollout runs is not hashed again, so its records name the version first hashed."""
    key = (str(spec.dataset), spec.domain)
    digest = digests.get(key)
    if digest is None:
        digest = digests[key] = dataset_sha256(spec.dataset, spec.domain)
    return digest


def ace_record(
    spec: EpisodeSpec | None,
    episode: Episode,
    terminated: bool,
    truncated: bool,
    info: Mapping[str, Any],
    *,
    stack_key: str | None = None,
    dataset_digest: str | None = None,
) -> dict[str, Any]:
    """The record of a finished ACE episode (module docstring); ``spec`` is None for an episode of
    a vector env. ``stack_key``: ``_stack_key(spec)``, ``dataset_digest``: the spec's
    ``dataset_sha256``, when the caller has them already."""
    reset = episode.reset_info
    return {
        "key": episode.key,
        "policy": episode.policy,
        "dataset": spec.dataset if spec else None,
        "domain": spec.domain if spec else reset.get("domain"),
        "instance_id": reset.get("instance_id"),
        "instance_index": reset.get("instance_index"),
        "hidden_slots": reset.get("hidden_slots"),
        "decoy_budget": reset.get("decoy_budget"),
        "curriculum_level": reset.get("curriculum", {}).get("level"),
        "seed": spec.seed if spec else None,
        "trial": spec.trial if spec else 0,
        "tool_failure_rate": spec.tool_failure_rate if spec else None,
        "env_config": jsonable(reset.get("budgets", {})),
        "max_turns": spec.max_turns if spec else None,
        "settings": list(spec.settings) if spec else [],
        "score": float(info.get("score") or 0.0),
        "reason": info.get("reason"),
        "terminated": bool(terminated),
        "truncated": bool(truncated),
        "grid": info.get("grid"),
        "usage": episode.usage,
        "notes": jsonable(episode.notes),
        "failures": failure_log(episode.turns) if _may_inject_failures(spec, episode.env) else [],
        **{
            name: value
            for benchmark in BENCHMARKS
            for name, value in benchmark.record_fields_of(episode.env, info).items()
        },
        "messages": episode.messages,
        "tools": episode.tools,
        "turns": episode.turns,
        "tokens": token_trajectory(episode),
        "replay": replay_fields(spec, stack_key, dataset_digest),
    }


def _may_inject_failures(spec: EpisodeSpec | None, env: gym.Env | None) -> bool:
    """False when the episode's env is a stack :meth:`EpisodeSpec.make_env` built without a
    :class:`~ace_gym.wrappers.ToolFailureInjection` layer, whose turns then carry no failure (the
    scan of the turn log is skipped: at the episode's end that log is cold in the CPU caches, and
    reading it cost about as much as the record's other fields). Any other env: True."""
    if type(spec) is not EpisodeSpec or env is None:
        return True
    while isinstance(env, gym.Wrapper):
        if isinstance(env, ToolFailureInjection):
            return True
        env = env.env
    return False


def replay_fields(
    spec: EpisodeSpec | None, stack_key: str | None = None, dataset_digest: str | None = None
) -> dict[str, Any] | None:
    """What a replay of the episode needs (docs/replay.md): ``spec`` (the :class:`EpisodeSpec` as
    JSON values), ``env_spec`` (the env stack that spec builds, as ``env.spec`` names it: id,
    keyword arguments, wrappers), ``version`` (of ace_gym) and ``dataset_sha256``
    (:func:`~ace_gym.instance.dataset_sha256`). None for an episode of a vector env, which has no
    spec of its own. A subclass's spec (one that plays in a server, say) is recorded as the plain
    spec it extends, and ``env_spec`` is always the stack of that plain spec, so replays run locally.
    ``stack_key``: ``_stack_key(spec)`` when the caller has it already (the same for a subclass's
    spec and the plain spec it extends); ``dataset_digest``: ``dataset_sha256`` likewise."""
    if spec is None:
        return None
    local = (
        spec
        if type(spec) is EpisodeSpec
        else EpisodeSpec(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(EpisodeSpec)})
    )
    stack_json = _stack_spec_json(local, stack_key or _stack_key(local))
    return {
        "spec": json.loads(local.to_json()),
        "env_spec": None if stack_json is None else json.loads(stack_json),
        "version": __version__,
        "dataset_sha256": dataset_digest or dataset_sha256(spec.dataset, spec.domain),
    }


_SPEC_FIELDS = tuple(f.name for f in dataclasses.fields(EpisodeSpec))
_EPISODE_FIELDS = frozenset({"instance_index", "instance_id", "seed", "trial"})
"""The :class:`EpisodeSpec` fields that pick what is played, never the env stack it is played in."""
_STACK_FIELDS = tuple(name for name in _SPEC_FIELDS if name not in _EPISODE_FIELDS)


def _fields_json(spec: EpisodeSpec, names: tuple[str, ...]) -> str:
    """The fields ``names`` of ``spec`` (JSON data; ``env_kwargs`` as a plain dict) as JSON text, keys sorted."""
    fields = {name: getattr(spec, name) for name in names}
    if fields.get("context", ()) is None:  # a spec without a context policy reads as before the field
        del fields["context"]
    if "env_kwargs" in fields:
        fields["env_kwargs"] = dict(spec.env_kwargs)
    return json.dumps(fields, sort_keys=True)


def _stack_key(spec: EpisodeSpec) -> str:
    """The fields of ``spec`` that :meth:`EpisodeSpec.make_env` builds the env stack from, as JSON text."""
    return _fields_json(spec, _STACK_FIELDS)


_STACK_SPECS: dict[str, str | None] = {}
_MAX_STACK_SPECS = 256


def _stack_spec_json(spec: EpisodeSpec, stack_key: str) -> str | None:
    """``spec.make_env().spec`` as JSON, built once per process for each ``stack_key``
    (:func:`_stack_key`: the spec's fields but :data:`_EPISODE_FIELDS`, which the stack does not
    depend on): building a stack and copying its spec up the wrappers costs as much as a few turns
    of an episode."""
    if stack_key in _STACK_SPECS:
        return _STACK_SPECS[stack_key]
    env = spec.make_env()
    try:
        stack = None if env.spec is None else env.spec.to_json()
    finally:
        env.close()
    if len(_STACK_SPECS) >= _MAX_STACK_SPECS:
        _STACK_SPECS.clear()
    _STACK_SPECS[stack_key] = stack
    return stack


def run_vector_episodes(
    envs: gym.vector.VectorEnv,
    policy: Policy,
    *,
    num_episodes: int,
    seed: int | None = None,
    name: str | None = None,
) -> Iterator[dict[str, Any]]:
    """Collect ``num_episodes`` episodes from a vector env of chat-adapted ACE envs.

    The vector env must use next-step autoreset (Gymnasium's default): an env that finished is
    reset by the following ``step``, whose action for it is ignored. Every step asks ``policy``
    for the actions of all envs with a running episode in one call (one ``generate`` call for a
    chat engine). Episodes get keys ``"<policy>|vector|<n>"`` in start order; ``seed`` seeds the
    first reset (env i gets ``seed + i``), later instances come from each env's own seeded
    stream; episode n of a scripted policy draws from a seed of ``(seed, n)``.

    An episode of a shared :class:`~ace_gym.wrappers.Curriculum` that ends leaves its outcome to
    the collector (``info["curriculum_outcome"]``, not yet reported): it goes to every sub-env
    (``envs.call("report", outcome)``, in env order) before the next step resets any of them.
    """
    mode = envs.metadata.get("autoreset_mode")
    if mode is not None and getattr(mode, "name", str(mode)) != "NEXT_STEP":
        raise ConfigError("autoreset_mode", mode, "run_vector_episodes needs next-step autoreset")
    label = name or policy_name(policy)
    actor = actor_of(policy)
    count = envs.num_envs
    started = finished = 0
    episodes: list[Episode | None] = [None] * count
    resetting = [True] * count  # the next observation of env i starts an episode

    observations, infos = envs.reset(seed=seed)
    rewards = terminations = truncations = np.zeros(count)  # read only after the first step
    turns: dict[int, Turn] = {}  # env index -> the turn its episode played in the last step
    while True:
        for i in range(count):
            info = _item(infos, i)
            if resetting[i]:
                resetting[i] = False
                if started < num_episodes:
                    episode_seed = int(np.random.SeedSequence([seed or 0, started]).generate_state(1)[0])
                    opened = Episode(
                        f"{label}|vector|{started}", label, None, partial(ace_record, None), policy_seed=episode_seed
                    )
                    opened.begin(observations[i], info)
                    actor.start(opened, observations[i], info)
                    episodes[i] = opened
                    started += 1
                continue
            episode = episodes[i]
            if episode is None or i not in turns:
                continue
            episode.record_step(float(rewards[i]), info, turns[i])
            if terminations[i] or truncations[i]:
                episodes[i] = None
                resetting[i] = True
                finished += 1
                outcome = info.get("curriculum_outcome")
                if outcome is not None and not outcome["reported"]:
                    envs.call("report", outcome)  # type: ignore[attr-defined]  # Sync/AsyncVectorEnv, make_vec
                yield episode.finish(bool(terminations[i]), bool(truncations[i]), info)
        if finished >= num_episodes:
            return
        running = {i: episode for i, episode in enumerate(episodes) if episode is not None}
        turns = dict(zip(running, actor.act(list(running.values())), strict=True)) if running else {}
        actions: list[Any] = [""] * count  # envs without a tracked episode: ignored or untracked
        for i, turn in turns.items():
            actions[i] = turn.action
        began = time.perf_counter()
        observations, rewards, terminations, truncations, infos = envs.step(tuple(actions))
        elapsed = (time.perf_counter() - began) / max(1, len(running))
        for episode in running.values():
            episode.usage["env_s"] += elapsed


def run_env_episodes(
    env: gym.Env,
    policy: Policy,
    *,
    num_episodes: int,
    seed: int | None = None,
    name: str | None = None,
) -> Iterator[dict[str, Any]]:
    """Collect ``num_episodes`` episodes one after another from one chat-adapted ACE env (a
    training loop's single env): the first reset is seeded with ``seed``, later instances come
    from the env's own seeded stream, as a vector env's autoreset draws them, so this env seeded
    ``s + i`` plays the episodes of sub-env ``i`` of a vector env seeded ``s``. Keys
    ``"<policy>|env|<n>"``; episode n of a scripted policy draws from a seed of ``(seed, n)``;
    the env stays open."""
    label = name or policy_name(policy)

    def open_episode(number: int) -> tuple[Episode, Any, dict[str, Any]]:
        policy_seed = int(np.random.SeedSequence([seed or 0, number]).generate_state(1)[0])
        episode = Episode(
            f"{label}|env|{number}", label, env, partial(ace_record, None), policy_seed=policy_seed, release=_keep_open
        )
        observation, info = episode.reset(seed=seed if number == 0 else None)
        return episode, observation, info

    count = integer("num_episodes", num_episodes, minimum=0)
    return run_loop(range(count), open_episode, actor_of(policy), batch_size=1)


def _keep_open(env: gym.Env) -> None:
    """An episode of :func:`run_env_episodes` leaves the env open for the next one."""


def _item(infos: Mapping[str, Any], i: int) -> dict[str, Any]:
    """Env ``i``'s entries of a vector env's batched info dict."""
    out: dict[str, Any] = {}
    for key, values in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get(f"_{key}")
        if mask is not None and not mask[i]:
            continue
        out[key] = _item(values, i) if isinstance(values, Mapping) else jsonable(values[i])
    return out

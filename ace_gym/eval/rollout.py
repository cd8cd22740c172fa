"""Batched rollouts of ACE episodes, one JSON record each (:mod:`ace_gym.eval.records`), with any policy.

:func:`run_episodes` takes :class:`~ace_gym.eval.episode_spec.EpisodeSpec` s and a policy and
yields one record per finished episode (in finishing order), through the one rollout loop
(:mod:`ace_gym.runs.loop`): up to ``batch_size`` episodes run at once, and when one finishes the
next spec takes its place. Every episode plays its spec's stack (a chat adapter under a turn
budget, e.g. ``StepBudget(ChatAdapter(ToolFailureInjection(AceEnv)))``): a
:class:`~ace_gym.agents.ScriptedPolicy` one tool call per turn, as an assistant message with native
``tool_calls``; a :class:`~ace_gym.agents.ChatEngine` whatever it writes, the conversations of all
active episodes going to ``engine.generate`` in one call per turn. The stacks are made in this
process, or by ``make_env`` (:class:`~ace_gym.eval.remote.RemoteStackFactory`: in an env server).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

import gymnasium as gym

from ace_gym.agents.base import Policy
from ace_gym.agents.policies import policy_name
from ace_gym.eval.episode_spec import EpisodeSpec
from ace_gym.eval.records import ace_record
from ace_gym.instance import dataset_sha256
from ace_gym.runs.loop import Actor, Episode, actor_of, run_loop
from ace_gym.stacks import StackSpec

StackFactory = Callable[[StackSpec], gym.Env]
"""What makes an episode's env from its stack: :meth:`StackSpec.make` in this process, or a remote one."""


def run_episodes(
    specs: Iterable[EpisodeSpec],
    policy: Policy | Actor,
    *,
    batch_size: int = 32,
    name: str | None = None,
    make_env: StackFactory = StackSpec.make,
) -> Iterator[dict[str, Any]]:
    """Run every spec with ``policy`` (or an :class:`~ace_gym.runs.loop.Actor` of one's own),
    ``batch_size`` episodes at a time, each in the env ``make_env`` makes of its stack; yield each
    finished episode's record (:func:`~ace_gym.eval.records.ace_record`). ``name`` overrides the
    policy name in keys. An engine that cannot reach or load its model raises
    :class:`~ace_gym.errors.EngineUnavailableError` from the iterator: the episodes then running
    yield no record."""
    label = name or policy_name(policy)
    stacks = _IdleStacks(make_env)
    opener = partial(_open, label=label, stacks=stacks, digests={})
    return stacks.closing(run_loop(specs, opener, actor_of(policy), batch_size))


def _open(
    spec: EpisodeSpec, label: str, stacks: _IdleStacks, digests: dict[tuple[str, str], str]
) -> tuple[Episode, Any, dict[str, Any]]:
    env, release = stacks.take(spec.stack)
    record = partial(ace_record, spec, dataset_digest=_dataset_digest(spec, digests))
    episode = Episode(spec.key(label), label, env, record, policy_seed=spec.policy_seed, release=release)
    observation, info = episode.reset(seed=spec.seed, options=spec.reset_options())
    return episode, observation, info


class _IdleStacks:
    """The envs of finished episodes, each played again by the next episode of an equal stack
    instead of making a new one: an episode always resets its env with its spec's seed and
    options, and every layer of a stack starts over from that reset (its RNG reseeded, its
    counters and logs new), so a reused env plays the episode a new one would. Idle envs are
    closed when the rollout ends."""

    def __init__(self, make_env: StackFactory) -> None:
        self._make_env = make_env
        self._idle: dict[StackSpec, list[gym.Env]] = {}

    def take(self, stack: StackSpec) -> tuple[gym.Env, Callable[[gym.Env], None]]:
        """An env of ``stack`` and what its episode calls with it when it ends."""
        idle = self._idle.get(stack)
        return (idle.pop() if idle else self._make_env(stack)), partial(self._keep, stack)

    def _keep(self, stack: StackSpec, env: gym.Env) -> None:
        self._idle.setdefault(stack, []).append(env)

    def closing(self, records: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """``records``, then (or when the caller stops early) every idle env closed."""
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
    key = (spec.dataset, spec.domain)
    digest = digests.get(key)
    if digest is None:
        digest = digests[key] = dataset_sha256(spec.dataset, spec.domain)
    return digest

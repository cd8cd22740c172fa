"""Episodes collected from envs a training loop already holds, one JSON record each
(:func:`~ace_gym.eval.records.ace_record`, without a spec): :func:`run_vector_episodes` drives a
Gymnasium vector env over the chat adapter (``gym.make_vec`` / ``SyncVectorEnv`` /
``AsyncVectorEnv``, next-step autoreset), :func:`run_env_episodes` one env, episode after episode,
through the one rollout loop (:mod:`ace_gym.runs.loop`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np

from ace_gym.agents.base import Policy
from ace_gym.agents.policies import policy_name
from ace_gym.errors import ConfigError, integer
from ace_gym.eval.records import ace_record
from ace_gym.runs.loop import Episode, Turn, actor_of, jsonable, run_loop


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

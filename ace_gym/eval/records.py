"""The record of a finished ACE episode: one JSON object per episode of the rollouts.

A record (JSON-serialisable) holds: ``key``, ``policy``, what the episode's stack states
(:func:`stack_fields`: ``dataset``, ``domain``, ``tool_failure_rate``, ``max_turns``, ``settings``:
the registry entries marked as settings, :func:`ace_gym.stacks.setting_names`), ``instance_id``, ``instance_index``,
``seed``, ``trial``, ``env_config`` (the tool budgets), ``hidden_slots``, ``decoy_budget``,
``curriculum_level`` (the ladder index a :class:`~ace_gym.wrappers.Curriculum` chose, else None),
``score`` (0.0/1.0), ``reason``, ``terminated``, ``truncated``, ``grid``, ``messages`` (OpenAI chat
format, scripted calls included), ``tools``, ``turns`` (per turn: the ``action`` as played,
``reward``, the adapter's ``info`` and, when the engine reports them, token counts and
``prompt_token_ids`` / ``completion_token_ids`` / ``logprobs`` / ``finish_reason``), ``tokens`` (an
engine that generates from token ids, vLLM or transformers, plays token-exact: ``prompt_ids``,
``response_ids``, ``assistant_mask``, ``logprobs``, ``turn_starts`` as
:meth:`~ace_gym.chat_template.ChatTokens.trajectory` lays them out, the prompt of turn t being
``prompt_ids + response_ids[:turn_starts[t]]``; None for other policies), ``usage``
(:mod:`ace_gym.runs.loop`), ``notes`` (what a scripted policy reports), ``failures`` (every
injected tool failure, whether and in how many turns the agent recovered:
:func:`ace_gym.eval.recovery.failure_log`), ``replay`` (what a replay needs, :func:`replay_fields`,
docs/replay.md), and the fields each benchmark adds
(:meth:`~ace_gym.benchmark.Benchmark.record_fields_of`: under AgencyBench's protocol
``feedback_rounds`` / ``scenario``). Members of a GRPO-style group share
instance and seed and differ in ``trial``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ace_gym.eval.episode_spec import EpisodeSpec
from ace_gym.eval.recovery import failure_log
from ace_gym.instance import dataset_sha256
from ace_gym.runs.loop import Episode, jsonable, token_trajectory
from ace_gym.stacks import BENCHMARKS, WRAPPERS, StackSpec
from ace_gym.version import __version__


def ace_record(
    spec: EpisodeSpec | None,
    episode: Episode,
    terminated: bool,
    truncated: bool,
    info: Mapping[str, Any],
    *,
    dataset_digest: str | None = None,
) -> dict[str, Any]:
    """The record of a finished ACE episode (module docstring); ``spec`` is None for an episode of
    a vector env. ``dataset_digest``: the spec's ``dataset_sha256``, when the caller has it already."""
    reset = episode.reset_info
    stated = stack_fields(spec.stack) if spec else {"domain": reset.get("domain")}
    return {
        "key": episode.key,
        "policy": episode.policy,
        "dataset": stated.get("dataset"),
        "domain": stated["domain"],
        "instance_id": reset.get("instance_id"),
        "instance_index": reset.get("instance_index"),
        "hidden_slots": reset.get("hidden_slots"),
        "decoy_budget": reset.get("decoy_budget"),
        "curriculum_level": reset.get("curriculum", {}).get("level"),
        "seed": spec.seed if spec else None,
        "trial": spec.trial if spec else 0,
        "tool_failure_rate": stated.get("tool_failure_rate"),
        "env_config": jsonable(reset.get("budgets", {})),
        "max_turns": stated.get("max_turns"),
        "settings": stated.get("settings", []),
        "score": float(info.get("score") or 0.0),
        "reason": info.get("reason"),
        "terminated": bool(terminated),
        "truncated": bool(truncated),
        "grid": info.get("grid"),
        "usage": episode.usage,
        "notes": jsonable(episode.notes),
        "failures": failure_log(episode.turns) if _may_inject_failures(spec) else [],
        **{
            name: value
            for benchmark in BENCHMARKS
            for name, value in benchmark.record_fields_of(episode.env, info).items()
        },
        "messages": episode.messages,
        "tools": episode.tools,
        "turns": episode.turns,
        "tokens": token_trajectory(episode),
        "replay": replay_fields(spec, dataset_digest),
    }


def stack_fields(stack: StackSpec) -> dict[str, Any]:
    """What a record states of the episode's stack, to summarise by: its ``dataset`` and
    ``domain``, its ``tool_failure_rate`` (0.0 without failure injection), ``max_turns`` (None
    when the turn budget is at its default) and ``settings`` (its wrappers marked as settings, in stacking
    order)."""
    layers = dict(stack.wrappers)
    return {
        "dataset": stack.env_kwargs["dataset"],
        "domain": stack.env_kwargs["domain"],
        "tool_failure_rate": float(layers.get("failure_injection", {}).get("rate", 0.0)),
        "max_turns": layers.get("step_budget", {}).get("max_turns"),
        "settings": [name for name, _ in stack.wrappers if WRAPPERS[name].setting],
    }


def _may_inject_failures(spec: EpisodeSpec | None) -> bool:
    """False when the episode's stack holds no failure injection, whose turns then carry no
    failure (the scan of the turn log is skipped: at the episode's end that log is cold in the
    CPU caches, and reading it cost about as much as the record's other fields). No spec: True."""
    return spec is None or any(name == "failure_injection" for name, _ in spec.stack.wrappers)


def replay_fields(spec: EpisodeSpec | None, dataset_digest: str | None = None) -> dict[str, Any] | None:
    """What a replay of the episode needs (docs/replay.md): ``spec`` (:meth:`EpisodeSpec.to_dict`:
    the stack and the instance, seed and trial), ``version`` (of ace_gym) and ``dataset_sha256``
    (:func:`~ace_gym.instance.dataset_sha256`; ``dataset_digest`` when the caller has it). None
    for an episode of a vector env, which has no spec of its own."""
    if spec is None:
        return None
    return {
        "spec": spec.to_dict(),
        "version": __version__,
        "dataset_sha256": dataset_digest or dataset_sha256(spec.dataset, spec.domain),
    }

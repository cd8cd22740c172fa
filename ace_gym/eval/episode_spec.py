"""One ACE episode to play: an env stack (:class:`~ace_gym.stacks.StackSpec`) and the instance,
seed and trial it is played on.

The stack is the one description of what is played: its env id and keyword arguments and its
wrappers, each named in the registry (:data:`ace_gym.stacks.WRAPPERS`), so any registered wrapper
can be played without a field of its own here. :meth:`EpisodeSpec.of` builds the stack the
rollouts play from the usual options (dataset, failure rate, planning settings, turn limit,
AgencyBench's protocol, context policy).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from ace_gym.domains import get_domain
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError, did_you_mean, integer, optional_integer, probability
from ace_gym.feedback.rounds import ACE_THRESHOLD, TRAINING_REWARD
from ace_gym.registration import register_domain
from ace_gym.stacks import StackSpec, setting_names

CHAT_LAYERS = ("chat_adapter", "step_budget")
"""The wrappers every episode's stack holds: the rollouts play chat turns under a turn budget."""


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode: ``stack`` (the env and its wrappers, holding a chat adapter and a turn budget)
    played on an instance, with a seed and a trial.

    Exactly one of ``instance_index`` / ``instance_id`` picks the instance (neither: the env draws
    it from ``seed``). ``trial`` tells apart the members of a GRPO-style group (same instance and
    seed; failure injection draws from it). ConfigError naming the field for a value no episode
    can be played with.
    """

    stack: StackSpec
    instance_index: int | None = None
    instance_id: str | None = None
    seed: int = 0
    trial: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.stack, StackSpec):
            raise ConfigError("stack", self.stack, "must be a StackSpec")
        names = [name for name, _ in self.stack.wrappers]
        missing = [name for name in CHAT_LAYERS if name not in names]
        if missing:
            raise ConfigError("stack.wrappers", names, f"an episode's stack holds {' and '.join(missing)}")
        for name in ("domain", "dataset"):
            if not isinstance(self.stack.env_kwargs.get(name), str):
                raise ConfigError(f"stack.env_kwargs.{name}", self.stack.env_kwargs.get(name), "must be a string")
        object.__setattr__(self, "seed", integer("seed", self.seed, minimum=0))
        object.__setattr__(self, "trial", integer("trial", self.trial, minimum=0))
        object.__setattr__(self, "instance_index", optional_integer("instance_index", self.instance_index, minimum=0))
        if self.instance_id is not None and not isinstance(self.instance_id, str):
            raise ConfigError("instance_id", self.instance_id, "must be a string or None")

    @classmethod
    def of(
        cls,
        domain: str,
        dataset: str = "5x5",
        *,
        instance_index: int | None = None,
        instance_id: str | None = None,
        seed: int = 0,
        trial: int = 0,
        tool_failure_rate: float = 0.0,
        env_kwargs: Mapping[str, Any] | None = None,
        max_turns: int | None = None,
        settings: Sequence[str] = (),
        scenario: Mapping[str, Any] | None = None,
        feedback_rounds: Mapping[str, Any] | None = None,
        failure_injection: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> EpisodeSpec:
        """The episode the rollouts play, its stack in the registry's order: the ``ACE-<domain>-v0``
        env on ``dataset`` with ``env_kwargs`` (:class:`~ace_gym.envs.AceEnv` keyword arguments:
        ``extra_query_num``, ``global_check_alpha``, ``check_include_reason``, ``max_query_ids``,
        ``max_query_fields``); ``ACE-<domain>-scenario-v0`` with ``scenario``'s arguments
        (:class:`~ace_gym.feedback.scenario.ScenarioEnv`: ``stages``, ``max_attempts``,
        ``threshold``, ``feedback``, ``final_reward``) when set; failure injection when
        ``tool_failure_rate`` > 0 or ``failure_injection`` (its other arguments: ``failure_modes``,
        ``tool_rates``, ``rng``, ``draws``) is given; the ``settings`` (registry entries marked as settings: what ``ace-gym eval --wrappers`` takes) with their default
        arguments; the chat adapter; the context policy (:class:`~ace_gym.wrappers.ContextWindow`)
        with ``context``'s arguments when set; the turn budget (``max_turns`` policy turns, else
        the budget's default); feedback rounds with ``feedback_rounds``' arguments when set. The
        protocols name their ``threshold`` and ``final_reward`` (the defaults filled in), so keys
        tell a run from one played under another default."""
        if not isinstance(domain, str) or not isinstance(dataset, str):
            name, value = ("domain", domain) if not isinstance(domain, str) else ("dataset", dataset)
            raise ConfigError(name, value, "must be a string")
        env_kwargs = _checked_env_kwargs({} if env_kwargs is None else env_kwargs)
        get_domain(domain)  # an unknown domain is refused as the env refuses it, naming the field
        register_domain(domain)  # a domain added after import has its ids too
        rate = probability("tool_failure_rate", tool_failure_rate)
        max_turns = optional_integer("max_turns", max_turns, minimum=1)
        kwargs = {"domain": domain, "dataset": dataset, **env_kwargs}
        env_id = f"ACE-{domain}-v0"
        if scenario is not None:
            env_id = f"ACE-{domain}-scenario-v0"
            kwargs.update({"final_reward": TRAINING_REWARD, **scenario})
        layers: list[str | tuple[str, Mapping[str, Any]]] = list(setting_names(settings, "settings"))
        if rate > 0 or failure_injection is not None:
            layers.append(("failure_injection", {"rate": rate, **(failure_injection or {})}))
        layers.append(("chat_adapter", {}))
        if context is not None:
            layers.append(("context_window", dict(context)))
        layers.append(("step_budget", {} if max_turns is None else {"max_turns": max_turns}))
        if feedback_rounds is not None:
            rounds = {"threshold": ACE_THRESHOLD, "final_reward": TRAINING_REWARD, **feedback_rounds}
            layers.append(("feedback_rounds", rounds))
        stack = StackSpec.of(env_id, kwargs, layers)
        return cls(stack, instance_index=instance_index, instance_id=instance_id, seed=seed, trial=trial)

    @property
    def domain(self) -> str:
        """The domain the stack's env plays."""
        return str(self.stack.env_kwargs["domain"])

    @property
    def dataset(self) -> str:
        """The dataset (a name or a file) the stack's env reads."""
        return str(self.stack.env_kwargs["dataset"])

    def key(self, policy: str) -> str:
        """The identity of this episode under ``policy`` (resume skips episodes whose key exists):
        the policy, the instance, the seed, the trial and the stack's key."""
        instance = self.instance_id if self.instance_id is not None else f"#{self.instance_index}"
        return f"{policy}|{instance}|seed={self.seed}|trial={self.trial}|{self.stack.key()}"

    def group(self, size: int) -> list[EpisodeSpec]:
        """``size`` copies of this spec with trials 0..size-1: a GRPO-style group (same instance,
        seed and stack; members differ only in the policy's sampling)."""
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

    def make_env(self) -> gym.Env:
        """The env every policy plays: :attr:`stack` made in this process."""
        return self.stack.make()

    def opening(self) -> list[dict[str, str]]:
        """The episode's opening ``[system, user]`` messages (``role`` and ``content``), as
        :meth:`make_env` starts it: what a trainer's dataset row shows as the prompt."""
        env = self.make_env()
        messages, _ = env.reset(seed=self.seed, options=self.reset_options())
        env.close()
        return [{"role": m["role"], "content": m["content"]} for m in messages]

    def policy_seed(self) -> int:
        """The seed of a scripted policy's own draws: a function of ``seed`` and ``trial``."""
        return int(np.random.SeedSequence([self.seed, self.trial]).generate_state(1)[0])

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain JSON values: ``stack`` (:meth:`StackSpec.to_dict`), ``instance_index``,
        ``instance_id``, ``seed``, ``trial``."""
        return {
            "stack": self.stack.to_dict(),
            "instance_index": self.instance_index,
            "instance_id": self.instance_id,
            "seed": self.seed,
            "trial": self.trial,
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text, keys sorted (:meth:`from_json` reads it back): how a
        trainer's dataset row and a record name the episode."""
        return json.dumps(self.to_dict(), sort_keys=True, allow_nan=False)

    @classmethod
    def from_dict(cls, data: Any) -> EpisodeSpec:
        """The spec :meth:`to_dict` wrote; ConfigError naming the field for anything else."""
        if not isinstance(data, Mapping) or "stack" not in data:
            raise ConfigError("episode", data, "must be a JSON object with a stack")
        unknown = set(data) - {"stack", *_EPISODE_FIELDS}
        if unknown:
            raise ConfigError(
                "episode", sorted(unknown), f"unknown fields (known: stack, {', '.join(_EPISODE_FIELDS)})"
            )
        return cls(StackSpec.from_dict(data["stack"]), **{name: data[name] for name in _EPISODE_FIELDS if name in data})

    @classmethod
    def from_json(cls, text: str) -> EpisodeSpec:
        """The spec :meth:`to_json` wrote; ConfigError for text that is no such spec."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as error:
            raise ConfigError("episode", str(text)[:200], f"is not an EpisodeSpec as JSON ({error})") from None
        return cls.from_dict(data)


_EPISODE_FIELDS = ("instance_index", "instance_id", "seed", "trial")
"""What an episode adds to its stack."""

_ENV_KWARGS = tuple(
    name for name in inspect.signature(AceEnv).parameters if name not in ("domain", "dataset", "source", "max_steps")
)
"""The AceEnv keyword arguments :meth:`EpisodeSpec.of` takes in ``env_kwargs`` (its turn limit is ``max_turns``)."""


def _checked_env_kwargs(env_kwargs: Any) -> dict[str, Any]:
    """``env_kwargs`` as a dict; ConfigError naming the field for anything but AceEnv keyword arguments."""
    if not isinstance(env_kwargs, Mapping):
        raise ConfigError("env_kwargs", env_kwargs, "must map AceEnv keyword arguments to values")
    if "max_steps" in env_kwargs:
        raise ConfigError("env_kwargs", dict(env_kwargs), "use max_turns, not max_steps")
    unknown = [str(name) for name in env_kwargs if name not in _ENV_KWARGS]
    if unknown:
        raise ConfigError(
            f"env_kwargs[{unknown[0]!r}]",
            env_kwargs[unknown[0]],
            f"is no AceEnv keyword argument; known: {', '.join(_ENV_KWARGS)}{did_you_mean(unknown[0], _ENV_KWARGS)}",
        )
    return dict(env_kwargs)

"""The rollout collector's episodes played against an env server instead of in-process envs."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import gymnasium as gym

from ace_gym.eval.rollout import EpisodeSpec
from ace_gym.server.client import RemoteEnv


@dataclasses.dataclass(frozen=True)
class RemoteEpisodeSpec(EpisodeSpec):
    """An :class:`~ace_gym.eval.rollout.EpisodeSpec` whose envs run in the server at ``env_url``.

    The server builds the spec's own stack (:meth:`EpisodeSpec.stack`, sent as a
    :class:`~ace_gym.stacks.StackSpec`), so records and keys are the local ones. The dataset must
    be one the server can read (bundled, or inside its ``--data-dir``), and the server must serve
    the stack's env id (``ACE-<domain>-v0``, or ``ACE-<domain>-scenario-v0`` for a scenario).
    Its envs ask for the grader channel: an evaluation records and summarises the answer keys
    (:mod:`ace_gym.runs.answer_keys`), which its policy never sees (the adapter shows it texts).
    """

    env_url: str = ""

    def make_core_env(self) -> gym.Env:
        return RemoteEnv.from_stack(self.env_url, self.stack().below("chat_adapter"), grader=True)

    def make_env(self) -> gym.Env:
        return RemoteEnv.from_stack(self.env_url, self.stack(), grader=True)


def remote_specs(specs: Iterable[EpisodeSpec], env_url: str) -> list[RemoteEpisodeSpec]:
    """``specs`` played against the server at ``env_url`` (same keys, so runs resume across both)."""
    return [
        RemoteEpisodeSpec(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}, env_url=env_url)
        for spec in specs
    ]

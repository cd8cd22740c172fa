"""The rollouts' episodes played against an env server instead of in-process envs."""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym

from ace_gym.server.client import RemoteEnv
from ace_gym.stacks import StackSpec


@dataclass(frozen=True)
class RemoteStackFactory:
    """Makes an episode's stack in the server at ``env_url`` (``run_episodes(...,
    make_env=RemoteStackFactory(url))``): the server builds the same stack, so records and keys
    are the local ones and runs resume across both. The dataset must be one the server can read
    (bundled, or inside its ``--data-dir``), and the server must serve the stack's env id. Its
    envs ask for the grader channel: an evaluation records and summarises the answer keys
    (:mod:`ace_gym.runs.answer_keys`), which its policy never sees (the adapter shows it texts)."""

    env_url: str

    def __call__(self, stack: StackSpec) -> gym.Env:
        return RemoteEnv.from_stack(self.env_url, stack, grader=True)

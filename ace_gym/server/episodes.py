"""The rollout collector's episodes played against an env server instead of in-process envs."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import gymnasium as gym

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.eval.rollout import DEFAULT_MAX_TURNS, EpisodeSpec
from ace_gym.planning.settings import SETTINGS
from ace_gym.registration import ENV_IDS
from ace_gym.server.client import RemoteEnv


@dataclasses.dataclass(frozen=True)
class RemoteEpisodeSpec(EpisodeSpec):
    """An :class:`~ace_gym.eval.rollout.EpisodeSpec` whose envs run in the server at ``env_url``.

    The server builds the same stack the local spec builds (the ``ACE-<domain>-v0`` env, failure
    injection, the planning settings, the adapter and the turn budget), so records and keys are the
    local ones. The dataset must be one the server can read (bundled, or inside its ``--data-dir``).
    """

    env_url: str = ""

    def make_core_env(self) -> gym.Env:
        return RemoteEnv(
            self.env_url, self._env_id(), wrappers=self._core_wrappers(), dataset=self.dataset, **self.env_kwargs
        )

    def make_env(self) -> gym.Env:
        wrappers = [
            *self._core_wrappers(),
            ("ChatAdapter", {}),
            ("StepBudget", {"max_turns": self.max_turns or DEFAULT_MAX_TURNS}),
        ]
        return RemoteEnv(self.env_url, self._env_id(), wrappers=wrappers, dataset=self.dataset, **self.env_kwargs)

    def _env_id(self) -> str:
        return ENV_IDS[DOMAIN_NAMES.index(self.domain)]

    def _core_wrappers(self) -> list[tuple[str, dict[str, Any]]]:
        """Failure injection when the rate is > 0 or options are given, then the planning settings, as
        the local spec stacks them."""
        failure = (
            [("ToolFailureInjection", {"rate": self.tool_failure_rate, **(self.failure_injection or {})})]
            if self.tool_failure_rate > 0 or self.failure_injection is not None
            else []
        )
        settings = [(SETTINGS[name].class_name, dict(SETTINGS[name].defaults)) for name in self.settings]
        return [*failure, *settings]


def remote_specs(specs: Iterable[EpisodeSpec], env_url: str) -> list[RemoteEpisodeSpec]:
    """``specs`` played against the server at ``env_url`` (same keys, so runs resume across both)."""
    return [
        RemoteEpisodeSpec(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}, env_url=env_url)
        for spec in specs
    ]

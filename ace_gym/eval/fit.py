"""The recommended training settings: episodes that fit a trainer's budget (docs/training.md).

:data:`FIT` is one plain value: compact observations (``AceEnv(observation="compact")``) and
several tool calls in one assistant turn (the adapter runs them in order; the compact system
prompt says so), with ``solver-batch`` as the reference policy whose episodes set the budget.
:func:`fit_spec` applies it to an :class:`~ace_gym.eval.EpisodeSpec` and :func:`fit_stack` to a
:class:`~ace_gym.stacks.StackSpec`; nothing else changes, so a fit episode is keyed, recorded,
replayed, served and trained like any other.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ace_gym.eval.rollout import EpisodeSpec
from ace_gym.stacks import StackSpec

FIT: dict[str, Any] = {
    "env_kwargs": {"observation": "compact"},
    "policy": "solver-batch",
}
"""The recommended training settings: the env keyword arguments every fit episode gets, and the
reference policy (the exact solver with independent calls in one turn)."""


def fit_spec(spec: EpisodeSpec) -> EpisodeSpec:
    """``spec`` with :data:`FIT`'s env keyword arguments (its own others kept)."""
    return dataclasses.replace(spec, env_kwargs={**dict(spec.env_kwargs), **FIT["env_kwargs"]})


def fit_stack(stack: StackSpec) -> StackSpec:
    """``stack`` with :data:`FIT`'s env keyword arguments on its env."""
    return dataclasses.replace(stack, env_kwargs={**dict(stack.env_kwargs), **FIT["env_kwargs"]})

"""The recommended training settings: episodes that fit a trainer's budget (docs/training.md).

:data:`FIT` is one plain value: compact observations (``AceEnv(observation="compact")``), several
tool calls in one assistant turn (the adapter runs them in order; the compact system prompt says
so), budgets that keep blind search from paying (:data:`FIT_BUDGETS`) and ``solver-batch`` as the
reference policy whose episodes set the budget. :func:`fit_spec` applies it to an
:class:`~ace_gym.eval.EpisodeSpec` and :func:`fit_stack` to a :class:`~ace_gym.stacks.StackSpec`;
on the published 5x5 data both also renumber the item names (``item_names="renumbered"``: those
names give the truth away, docs/compatibility.md §7). Nothing else changes, so a fit episode is
keyed, recorded, replayed, served and trained like any other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ace_gym.eval.episode_spec import EpisodeSpec
from ace_gym.registration import DATASET_ENV_IDS
from ace_gym.stacks import StackSpec

FIT_BUDGETS: dict[str, Any] = {"global_check_alpha": 0, "extra_query_num": 4}
"""No global check (a blind search re-draws its grid after every failed check, and on the data
where a random slot-valid grid passes often, each check buys it another draw: with ⌊H/8⌋ checks
re-drawing the whole grid still earned 0.83 against greedy-local's 0.27 on shopping) and rules + H
+ 4 attribute queries per hidden slot: check-guided random search then is random slot-valid play,
while the reference policy, which needs no check, solves every instance (docs/training.md,
"Budgets"; ``benchmarks/bench_tells.py``)."""

FIT: dict[str, Any] = {
    "env_kwargs": {"observation": "compact", **FIT_BUDGETS},
    "policy": "solver-batch",
}
"""The recommended training settings: the env keyword arguments every fit episode gets, and the
reference policy (the exact solver with independent calls in one turn)."""

TRAINING_DATASET = "5x7"
"""The bundled data the recipes train on (generated, without the published data's name tell);
evaluation stays on the published 5x5 data (``EpisodeSpec``'s default)."""

PUBLISHED_DATASET = "5x5"
"""The bundled published data, whose item names give the truth away (docs/compatibility.md §7)."""


def tell_free_env_kwargs(env_kwargs: Mapping[str, Any], dataset: object) -> dict[str, Any]:
    """``env_kwargs`` for training on ``dataset``: with ``item_names="renumbered"`` on the
    published data (:data:`PUBLISHED_DATASET`) unless ``env_kwargs`` names its own."""
    renumber = {"item_names": "renumbered"} if dataset == PUBLISHED_DATASET else {}
    return {**renumber, **dict(env_kwargs)}


def fit_env_kwargs(env_kwargs: Mapping[str, Any], dataset: object) -> dict[str, Any]:
    """``env_kwargs`` with :data:`FIT`'s, and tell-free names (:func:`tell_free_env_kwargs`)."""
    return {**tell_free_env_kwargs(env_kwargs, dataset), **FIT["env_kwargs"]}


def fit_spec(spec: EpisodeSpec) -> EpisodeSpec:
    """``spec`` with :data:`FIT`'s env keyword arguments on its stack's env (:func:`fit_stack`)."""
    return dataclasses.replace(spec, stack=fit_stack(spec.stack))


def fit_stack(stack: StackSpec) -> StackSpec:
    """``stack`` with :data:`FIT`'s env keyword arguments on its env (see :func:`fit_env_kwargs`)."""
    env_kwargs = dict(stack.env_kwargs)
    dataset = env_kwargs.get("dataset", PUBLISHED_DATASET) if stack.env_id in DATASET_ENV_IDS else None
    return dataclasses.replace(stack, env_kwargs=fit_env_kwargs(env_kwargs, dataset))

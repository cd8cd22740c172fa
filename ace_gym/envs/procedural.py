"""Generated instances: :class:`GeneratorSource` (a certified instance per reset) and
:class:`ProceduralAceEnv`, the :class:`AceEnv` built on it that the ``ACE-<domain>-procedural-v0``
ids make."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ace_gym.domains import get_domain
from ace_gym.envs.ace_env import AceEnv
from ace_gym.envs.sources import Drawn
from ace_gym.errors import ConfigError, integers, number
from ace_gym.generators import InstanceConfig, generate_instance
from ace_gym.instance import CompiledInstance
from ace_gym.presets import PAPER_DECOY_BUDGETS, PAPER_HIDDEN_SLOTS

SEED_BOUND = 2**63 - 1


def procedural_instance_id(published_id: str, candidates_per_slot: int, seed: int) -> str:
    """``{domain}_r{R}_c{C}_h{H}_b{B}_k{K}_s{seed}``: every input the generated instance is a pure
    function of. (Dataset files keep the published ``..._h{H}_b{B}``, unique within a file.)"""
    return f"{published_id}_k{candidates_per_slot}_s{seed}"


class GeneratorSource:
    """A freshly generated, certified instance at every draw, from
    :func:`ace_gym.generators.generate_instance`: unlimited tasks with a horizon knob
    (``hidden_slots``) and a difficulty knob (``decoy_budget``).

    ``rows``, ``cols`` (grid size, default 5x7); ``hidden_slots`` and ``decoy_budget``: an int,
    or a list to draw from uniformly at each reset (default: the paper's values,
    :mod:`ace_gym.presets`); ``candidates_per_slot`` (K, effective max(K, B + 2));
    ``time_budget`` (seconds allowed per generated instance). Impossible or unboundedly large
    settings raise ConfigError here, naming the field and the largest allowed value: more hidden
    slots than cells, more than 10,000 cells or 100 rows, or an item pool (cells + H x
    (max(K, B + 2) - 1) items) above 50,000 (see :class:`ace_gym.generators.InstanceConfig`).

    ``draw`` takes H, B and an instance seed from the env's ``rng`` in that order, so the same
    reset seed gives the same instance in any process; reset ``options`` may pin
    ``hidden_slots``, ``decoy_budget`` and ``instance_seed`` (int), and name no dataset instance
    (``instance_index``/``instance_id``: ConfigError). The drawn instance has index -1, the reset
    info key ``instance_seed``, and the id :func:`procedural_instance_id` (the published id plus
    K and the seed, so two different generated grids never share an id).
    """

    def __init__(
        self,
        domain: str = "course",
        *,
        rows: int = 5,
        cols: int = 7,
        hidden_slots: int | Sequence[int] = PAPER_HIDDEN_SLOTS,
        decoy_budget: int | Sequence[int] = PAPER_DECOY_BUDGETS,
        candidates_per_slot: int = 25,
        time_budget: float = 120.0,
    ) -> None:
        self.domain = get_domain(domain)
        self.hidden_slot_choices = integers("hidden_slots", hidden_slots)
        self.decoy_budget_choices = integers("decoy_budget", decoy_budget)
        # every combination must be possible: fail now, not at reset. The config's limits only
        # tighten as H or B grow, so each B with the largest H and each H with the smallest B
        # cover every combination (in |H| + |B| checks, however long the lists), and an error
        # names the largest value allowed for every H
        for b in self.decoy_budget_choices:
            config = InstanceConfig(domain, rows, cols, max(self.hidden_slot_choices), b, candidates_per_slot, 0)
        for h in self.hidden_slot_choices:
            config = InstanceConfig(domain, rows, cols, h, min(self.decoy_budget_choices), candidates_per_slot, 0)
        self.rows, self.cols, self.candidates_per_slot = config.rows, config.cols, config.candidates_per_slot
        self.time_budget = float(number("time_budget", time_budget, above=0, note="(seconds)"))

    def draw(self, rng: np.random.Generator, options: Mapping[str, Any]) -> Drawn:
        for key in ("instance_index", "instance_id"):
            if key in options:
                raise ConfigError(
                    f"options[{key!r}]", options[key], "a procedural env has no dataset; pin instance_seed instead"
                )
        hidden = self.hidden_slot_choices[int(rng.integers(len(self.hidden_slot_choices)))]
        budget = self.decoy_budget_choices[int(rng.integers(len(self.decoy_budget_choices)))]
        seed = int(rng.integers(SEED_BOUND))
        hidden = options.get("hidden_slots", hidden)
        budget = options.get("decoy_budget", budget)
        seed = options.get("instance_seed", seed)
        instance = generate_instance(
            self.domain.name,
            rows=self.rows,
            cols=self.cols,
            hidden_slots=hidden,
            decoy_budget=budget,
            candidates_per_slot=self.candidates_per_slot,
            seed=seed,
            time_budget=self.time_budget,
        )
        unique_id = procedural_instance_id(instance.instance_id, self.candidates_per_slot, seed)
        compiled = CompiledInstance(instance.model_copy(update={"instance_id": unique_id}), self.domain)
        return Drawn(compiled, -1, {"instance_seed": seed})


class ProceduralAceEnv(AceEnv):
    """:class:`AceEnv` on a :class:`GeneratorSource`: ``ProceduralAceEnv(domain, **generator
    arguments, **env arguments)`` is ``AceEnv(domain, source=GeneratorSource(domain, **generator
    arguments), **env arguments)``, and is what the ``ACE-<domain>-procedural-v0`` and
    ``ACE-<domain>-procedural-10x10-v0`` ids make (their spec kwargs stay plain values).

    Everything else (tools, observations, reward, episode end, info) is :class:`AceEnv`'s; the
    generator arguments, reset options and the ``instance_seed`` info key are
    :class:`GeneratorSource`'s. There is no dataset (``dataset``: ConfigError).

    ## Version History
    * v0: first release.
    """

    def __init__(
        self,
        domain: str = "course",
        *,
        rows: int = 5,
        cols: int = 7,
        hidden_slots: int | Sequence[int] = PAPER_HIDDEN_SLOTS,
        decoy_budget: int | Sequence[int] = PAPER_DECOY_BUDGETS,
        candidates_per_slot: int = 25,
        time_budget: float = 120.0,
        **env_arguments: Any,
    ) -> None:
        if "dataset" in env_arguments:
            raise ConfigError("dataset", env_arguments["dataset"], "a procedural env generates its instances")
        source = GeneratorSource(
            domain,
            rows=rows,
            cols=cols,
            hidden_slots=hidden_slots,
            decoy_budget=decoy_budget,
            candidates_per_slot=candidates_per_slot,
            time_budget=time_budget,
        )
        super().__init__(domain, source=source, **env_arguments)

"""The procedural ACE env: a freshly generated, certified instance at every reset."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ace_gym.envs.ace_env import AceEnv
from ace_gym.errors import ConfigError
from ace_gym.generators import InstanceConfig, generate_instance
from ace_gym.instance import CompiledInstance

SEED_BOUND = 2**63 - 1


def procedural_instance_id(published_id: str, candidates_per_slot: int, seed: int) -> str:
    """``{domain}_r{R}_c{C}_h{H}_b{B}_k{K}_s{seed}``: every input the generated instance is a pure
    function of. (Dataset files keep the published ``..._h{H}_b{B}``, unique within a file.)"""
    return f"{published_id}_k{candidates_per_slot}_s{seed}"


def _choices(field: str, value: int | Sequence[int]) -> tuple[int, ...]:
    listed = (value,) if isinstance(value, int) else tuple(value)
    if not listed or not all(type(v) is int for v in listed):
        raise ConfigError(field, value, "must be an integer or a non-empty list of integers")
    return listed


class ProceduralAceEnv(AceEnv):
    """ACE grid planning on generated instances: unlimited fresh tasks with a horizon knob
    (``hidden_slots``) and a difficulty knob (``decoy_budget``).

    ## Description
    As :class:`AceEnv` (same tools, observations, reward and episode end), but ``reset`` draws a
    new instance from :func:`ace_gym.generators.generate_instance` instead of reading a file.
    Every instance carries a certificate: the truth is the only globally valid completion among
    the slot-valid candidates.

    ## Arguments
    ``domain``; ``rows``, ``cols`` (grid size, default 5x7); ``hidden_slots`` and
    ``decoy_budget``: an int, or a list to draw from uniformly at each reset;
    ``candidates_per_slot`` (K, effective max(K, B + 2)); ``time_budget`` (seconds allowed per
    generated instance); the remaining keyword arguments are those of :class:`AceEnv`.
    Impossible or unboundedly large settings raise ConfigError here, naming the field and the
    largest allowed value: more hidden slots than cells, more than 10,000 cells or 100 rows, or an
    item pool (cells + H x (max(K, B + 2) - 1) items) above 50,000 (see
    :class:`ace_gym.generators.InstanceConfig`).

    ## Reset
    ``reset(seed=s)`` draws H, B and an instance seed from the env's ``np_random``, so the same
    seed gives the same instance in any process. ``options`` may pin ``hidden_slots``,
    ``decoy_budget`` and ``instance_seed`` (int). ``info["instance_index"]`` is -1 (there is no
    dataset); ``info["instance_seed"]`` is the seed, and ``info["instance_id"]`` (also the
    instance's own ``instance_id``) is :func:`procedural_instance_id`: the published id plus K and
    the seed, so two different generated grids never share an id.

    ## Version History
    * v0: first release.
    """

    def __init__(
        self,
        domain: str = "course",
        *,
        rows: int = 5,
        cols: int = 7,
        hidden_slots: int | Sequence[int] = (1, 5, 7, 11, 15, 21),
        decoy_budget: int | Sequence[int] = (0, 2, 4, 8, 10, 15, 19, 21, 25),
        candidates_per_slot: int = 25,
        time_budget: float = 120.0,
        **env_arguments: Any,
    ) -> None:
        if "dataset" in env_arguments:
            raise ConfigError("dataset", env_arguments["dataset"], "a procedural env generates its instances")
        self.hidden_slot_choices = _choices("hidden_slots", hidden_slots)
        self.decoy_budget_choices = _choices("decoy_budget", decoy_budget)
        # every combination must be possible: fail now, not at reset. The config's limits only
        # tighten as H or B grow, so each B with the largest H and each H with the smallest B
        # cover every combination (in |H| + |B| checks, however long the lists), and an error
        # names the largest value allowed for every H
        for b in self.decoy_budget_choices:
            InstanceConfig(domain, rows, cols, max(self.hidden_slot_choices), b, candidates_per_slot, 0)
        for h in self.hidden_slot_choices:
            InstanceConfig(domain, rows, cols, h, min(self.decoy_budget_choices), candidates_per_slot, 0)
        if not isinstance(time_budget, (int, float)) or time_budget <= 0:
            raise ConfigError("time_budget", time_budget, "must be a positive number of seconds")
        self.rows, self.cols = rows, cols
        self.candidates_per_slot = candidates_per_slot
        self.time_budget = float(time_budget)
        self._instance_seed: int | None = None
        super().__init__(domain, dataset=None, **env_arguments)  # type: ignore[arg-type]

    def _select_instance(self, options: Mapping[str, Any]) -> tuple[CompiledInstance, int]:
        for key in ("instance_index", "instance_id"):
            if key in options:
                raise ConfigError(
                    f"options[{key!r}]", options[key], "a procedural env has no dataset; pin instance_seed instead"
                )
        rng = self.np_random
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
        self._instance_seed = seed
        unique_id = procedural_instance_id(instance.instance_id, self.candidates_per_slot, seed)
        return CompiledInstance(instance.model_copy(update={"instance_id": unique_id}), self.domain), -1

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        observation, info = super().reset(seed=seed, options=options)
        info["instance_seed"] = self._instance_seed
        return observation, info

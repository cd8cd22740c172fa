"""What an instance is generated from, validated up front, and the errors generation raises."""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ace_gym.domains import Domain, get_domain
from ace_gym.errors import AceGymError, ConfigError, integer


class GenerationError(AceGymError, RuntimeError):
    """A valid but hard configuration produced no instance within the attempt or time budget.

    ``attempts`` counts the seeds tried, ``reasons`` how often each failure reason occurred.
    """

    def __init__(self, config: InstanceConfig, attempts: int, seconds: float, reasons: Mapping[str, int]) -> None:
        self.config, self.attempts, self.seconds, self.reasons = config, attempts, seconds, dict(reasons)
        tried = "; ".join(f"{count}x {reason}" for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1]))
        super().__init__(
            f"no instance for {config.describe()} after {attempts} derived seeds in {seconds:.1f} s ({tried}); "
            "raise time_budget/max_attempts, lower decoy_budget, or try another seed"
        )

    def __reduce__(self) -> tuple[object, ...]:  # crosses process boundaries (generate_dataset workers)
        return (GenerationError, (self.config, self.attempts, self.seconds, self.reasons))


MAX_CELLS = 10_000
"""The largest grid (rows x cols) the generator builds."""
MAX_ROWS = 100
"""The most rows: a ``max_row_sum`` rule keeps one running total per row for every item."""
MAX_POOL_ITEMS = 50_000
"""The largest item pool: rows x cols grid items plus (effective candidates - 1) per hidden slot."""


@dataclass(frozen=True)
class InstanceConfig:
    """The inputs an instance is a pure function of (docs/compatibility.md §2; seed included).

    Bounded so that one attempt's memory stays bounded: rows x cols <= :data:`MAX_CELLS`, rows <=
    :data:`MAX_ROWS`, and the item pool, rows x cols + hidden_slots x (K_eff - 1) with
    K_eff = max(candidates_per_slot, decoy_budget + 2), at most :data:`MAX_POOL_ITEMS`. The
    builder gives *every* hidden slot K_eff candidates (the decoys of a branch slot plus the
    truth and a filter must fit in any one slot), so the pool, not the branch split, is what a
    large decoy budget blows up; ConfigError names the largest value the other fields allow.
    """

    domain: str
    rows: int
    cols: int
    hidden_slots: int
    decoy_budget: int
    candidates_per_slot: int
    seed: int

    def __post_init__(self) -> None:
        get_domain(self.domain)
        minima = {"rows": 1, "cols": 1, "hidden_slots": 1, "decoy_budget": 0, "candidates_per_slot": 1, "seed": 0}
        for field, minimum in minima.items():
            object.__setattr__(self, field, integer(field, getattr(self, field), minimum=minimum))
        cells = self.rows * self.cols
        if cells > MAX_CELLS:
            raise ConfigError("rows*cols", cells, f"grids above {MAX_CELLS} cells are not supported")
        if self.rows > MAX_ROWS:
            raise ConfigError(
                "rows", self.rows, f"at most {MAX_ROWS}: row-sum rules keep one total per row for every item"
            )
        if self.hidden_slots > cells:
            raise ConfigError(
                "hidden_slots", self.hidden_slots, f"a {self.rows}x{self.cols} grid has only {cells} cells"
            )
        largest_candidates = (MAX_POOL_ITEMS - cells) // self.hidden_slots + 1
        where = f"on a {self.rows}x{self.cols} grid with hidden_slots={self.hidden_slots}"
        pool = (
            f"the item pool ({cells} grid items + {self.hidden_slots} x (K_eff - 1) candidates) "
            f"is limited to MAX_POOL_ITEMS = {MAX_POOL_ITEMS}"
        )
        if self.candidates_per_slot > largest_candidates:
            raise ConfigError(
                "candidates_per_slot", self.candidates_per_slot, f"at most {largest_candidates} {where}: {pool}"
            )
        if self.decoy_budget + 2 > largest_candidates:
            raise ConfigError(
                "decoy_budget",
                self.decoy_budget,
                f"at most {largest_candidates - 2} {where}: every hidden slot gets "
                f"K_eff = max(candidates_per_slot, decoy_budget + 2) candidates and {pool}",
            )

    @property
    def domain_spec(self) -> Domain:
        return get_domain(self.domain)

    @property
    def cells(self) -> int:
        return self.rows * self.cols

    @property
    def effective_candidates(self) -> int:
        """K_eff = max(K, B + 2): the truth, every decoy and at least one filter fit in a slot."""
        return max(self.candidates_per_slot, self.decoy_budget + 2)

    @property
    def instance_id(self) -> str:
        return f"{self.domain}_r{self.rows}_c{self.cols}_h{self.hidden_slots}_b{self.decoy_budget}"

    @property
    def branch_cap(self) -> int:
        """Largest decoy count one branch slot may get: B when k <= 2, else floor(B / 2)."""
        return self.decoy_budget if self.branch_slot_count <= 2 else self.decoy_budget // 2

    @property
    def branch_slot_count(self) -> int:
        """k = min(H, ceil(sqrt(B))) (0 when B = 0).

        The published generator reduces k while B cannot be split into k parts in [1, cap]; with
        H >= 1 that never happens (k <= ceil(sqrt(B)) <= B, and for k >= 3, B >= 5 so
        k * floor(B / 2) >= B), so every budget fits: K_eff = max(K, B + 2) makes room for the
        decoys in any one slot.
        """
        budget = self.decoy_budget
        return 0 if budget == 0 else min(self.hidden_slots, math.isqrt(budget - 1) + 1)

    def describe(self) -> str:
        return (
            f"domain={self.domain} {self.rows}x{self.cols} hidden_slots={self.hidden_slots} "
            f"decoy_budget={self.decoy_budget} candidates_per_slot={self.candidates_per_slot} seed={self.seed}"
        )

    def attempt_rng(self, attempt: int) -> np.random.Generator:
        """The generator of attempt ``attempt``: a pure function of the config and the attempt."""
        entropy = [
            self.seed,
            zlib.crc32(self.domain.encode()),
            self.rows,
            self.cols,
            self.hidden_slots,
            self.decoy_budget,
            self.candidates_per_slot,
            attempt,
        ]
        return np.random.default_rng(np.random.SeedSequence(entropy))

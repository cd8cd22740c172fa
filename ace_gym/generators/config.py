"""What an instance is generated from, validated up front, and the errors generation raises."""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ace_gym.domains import Domain, get_domain
from ace_gym.errors import AceGymError, ConfigError


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


def _check_int(field: str, value: object, minimum: int) -> int:
    if type(value) is not int and not isinstance(value, np.integer):
        raise ConfigError(field, value, "must be an integer")
    if int(value) < minimum:  # type: ignore[call-overload]
        raise ConfigError(field, value, f"must be >= {minimum}")
    return int(value)  # type: ignore[call-overload]


@dataclass(frozen=True)
class InstanceConfig:
    """The inputs an instance is a pure function of (docs/compatibility.md §2; seed included)."""

    domain: str
    rows: int
    cols: int
    hidden_slots: int
    decoy_budget: int
    candidates_per_slot: int
    seed: int

    def __post_init__(self) -> None:
        get_domain(self.domain)
        for field, minimum in (("rows", 1), ("cols", 1), ("hidden_slots", 1), ("decoy_budget", 0)):
            object.__setattr__(self, field, _check_int(field, getattr(self, field), minimum))
        object.__setattr__(self, "candidates_per_slot", _check_int("candidates_per_slot", self.candidates_per_slot, 1))
        object.__setattr__(self, "seed", _check_int("seed", self.seed, 0))
        cells = self.rows * self.cols
        if self.hidden_slots > cells:
            raise ConfigError(
                "hidden_slots", self.hidden_slots, f"a {self.rows}x{self.cols} grid has only {cells} cells"
            )
        if self.cells > 10_000:
            raise ConfigError("rows*cols", cells, "grids above 10000 cells are not supported")

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

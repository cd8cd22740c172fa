"""The paper's benchmark values and the procedural env variants: written here once, imported by
the registration, the procedural instance source, the generator's command line and the docs.

No heavy imports: ``import ace_gym`` registers the procedural ids from this table without
loading the generator's numba kernels.
"""

from __future__ import annotations

PAPER_HIDDEN_SLOTS: tuple[int, ...] = (1, 5, 7, 11, 15, 21)
"""The hidden-slot counts H of the paper's 5x7 benchmark (the published 5x5 release stops at 15)."""
PAPER_DECOY_BUDGETS: tuple[int, ...] = (0, 2, 4, 8, 10, 15, 19, 21, 25)
"""The decoy budgets B of the paper's 5x7 benchmark (the published 5x5 release stops at 19)."""

PAPER_5X7: dict[str, int | list[int]] = {
    "rows": 5,
    "cols": 7,
    "hidden_slots": list(PAPER_HIDDEN_SLOTS),
    "decoy_budgets": list(PAPER_DECOY_BUDGETS),
    "candidates_per_slot": 25,
    "seed": 42,
}
"""The paper's 5x7 configuration as :func:`ace_gym.generators.generate_dataset` keyword arguments:
it generates the bundled ``dataset="5x7"`` byte for byte."""

PROCEDURAL_PRESETS: dict[str, dict[str, int | list[int]]] = {
    # the paper's 5x7 grid: H and B drawn per reset from its benchmark values
    "procedural": {
        "rows": 5,
        "cols": 7,
        "hidden_slots": list(PAPER_HIDDEN_SLOTS),
        "decoy_budget": list(PAPER_DECOY_BUDGETS),
        "candidates_per_slot": 25,
    },
    # long-horizon training: 20-60 hidden cells on a 10x10 grid, up to 100 decoys
    "procedural-10x10": {
        "rows": 10,
        "cols": 10,
        "hidden_slots": [20, 30, 40, 50, 60],
        "decoy_budget": [0, 10, 25, 50, 75, 100],
        "candidates_per_slot": 25,
    },
}
"""Procedural variants: ``ACE-<domain>-<variant>-v0`` -> keyword arguments of the procedural env
(plain JSON values, so that every spec serialises)."""

CURRICULUM_LADDERS: dict[str, tuple[tuple[int, int], ...]] = {
    # the paper's 5x7 values, easiest first: the horizon (H) grows first, then the decoys (B)
    "procedural": ((1, 0), (5, 0), (7, 2), (11, 4), (15, 8), (15, 10), (21, 15), (21, 19), (21, 25)),
    # long horizons on 10x10: H and B grow together up to the preset's largest values
    "procedural-10x10": ((20, 0), (20, 10), (30, 25), (40, 50), (50, 75), (60, 100)),
}
"""The default curriculum ladder of each procedural variant: ``(hidden_slots, decoy_budget)``
levels, easiest first, each drawn from that variant's own values (docs/curriculum.md)."""

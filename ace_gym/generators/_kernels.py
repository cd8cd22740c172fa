"""Numba kernel of the exact every-combination violation test, with its plain-Python twin.

Private: call it through :mod:`ace_gym.generators.combinations`, which validates shapes and
dtypes and imports this module (and so numba) only when the exact search is first needed. The
kernel takes contiguous int64 arrays and scalars only and holds no randomness.

Vocabulary (see :mod:`ace_gym.generators.combinations`): a grid is summarised by an int64 vector
of *components*, one per scalar quantity a global rule bounds, signed so that every component is
violated iff its aggregate exceeds its threshold ``thresholds[k]``. Components are additive over
cells, so replacing the truth of slot ``i`` by a candidate changes the vector by that candidate's
*delta* row.
"""

from __future__ import annotations

import itertools

import numpy as np
from numba import njit


@njit(cache=True)
def all_violate_kernel(
    base: np.ndarray, thresholds: np.ndarray, deltas: np.ndarray, offsets: np.ndarray, node_limit: int
) -> tuple[int, int]:
    """Whether every combination violates some component: ``(status, nodes visited)``.

    A combination picks, for each group ``g`` (rows ``offsets[g]:offsets[g+1]`` of ``deltas``),
    either nothing (the truth, delta 0) or one row; its vector is ``base`` plus the picked rows.
    ``status`` is 1 if every combination has a component above its threshold, 0 if one does not
    (a counterexample exists), -1 if ``node_limit`` search nodes did not settle it.

    Depth-first search with a sound prune: if ``acc + (per-component minimum still reachable)``
    already exceeds a threshold, every completion of the prefix violates that component.
    """
    groups = offsets.shape[0] - 1
    width = base.shape[0]
    # suffix[g, k] = sum over groups >= g of min(0, min row) for component k
    suffix = np.zeros((groups + 1, width), dtype=np.int64)
    for g in range(groups - 1, -1, -1):
        for k in range(width):
            low = 0
            for n in range(offsets[g], offsets[g + 1]):
                if deltas[n, k] < low:
                    low = deltas[n, k]
            suffix[g, k] = suffix[g + 1, k] + low
    acc = np.zeros((groups + 1, width), dtype=np.int64)
    for k in range(width):
        acc[0, k] = base[k]
    choice = np.full(groups + 1, -2, dtype=np.int64)  # -2: not started, -1: truth, n: delta row n
    depth = 0
    nodes = 0
    while depth >= 0:
        if choice[depth] == -2:
            nodes += 1
            if nodes > node_limit:
                return -1, nodes
            settled = False
            for k in range(width):
                if acc[depth, k] + suffix[depth, k] > thresholds[k]:
                    settled = True
                    break
            if settled:
                choice[depth] = -2
                depth -= 1
                continue
            if depth == groups:
                return 0, nodes  # no component can be pushed over its threshold: a valid combination
            choice[depth] = -1
        else:
            choice[depth] = offsets[depth] if choice[depth] == -1 else choice[depth] + 1
            if choice[depth] >= offsets[depth + 1]:
                choice[depth] = -2
                depth -= 1
                continue
        pick = choice[depth]
        for k in range(width):
            acc[depth + 1, k] = acc[depth, k] + (deltas[pick, k] if pick >= 0 else 0)
        choice[depth + 1] = -2
        depth += 1
    return 1, nodes


def all_violate_twin(base: np.ndarray, thresholds: np.ndarray, deltas: np.ndarray, offsets: np.ndarray) -> int:
    """Naive twin of :func:`all_violate_kernel`: enumerate every combination (1 or 0)."""
    options = [[None, *range(int(offsets[g]), int(offsets[g + 1]))] for g in range(len(offsets) - 1)]
    for combination in itertools.product(*options):
        vector = [int(b) for b in base]
        for pick in combination:
            if pick is not None:
                vector = [v + int(d) for v, d in zip(vector, deltas[pick], strict=True)]
        if not any(v > int(t) for v, t in zip(vector, thresholds, strict=True)):
            return 0
    return 1

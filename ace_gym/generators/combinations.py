"""Every-combination violation tests: the validating facade over the numba kernels.

The question both the generator and the certificate ask is: with candidate ``d`` in slot ``j``,
does *every* choice of truth-or-alternative in the slots ranked before ``j`` (later slots keep
their truth) break some global rule? Enumerating the choices costs prod(1 + a_i); these tests
avoid it where they can.

Each global rule is expressed as *components*: int64 aggregates that are additive over cells and
signed so that component ``k`` is violated iff its aggregate exceeds ``thresholds[k]`` (a lower
bound ``sum >= V`` becomes ``-sum > -V``; ``repeat_max`` has one component per category;
``max_row_sum`` one per row). Replacing the truth of a slot by a candidate adds that candidate's
*delta* row to the grid's vector.

* :func:`breaks_every_combination` — the separable sufficient test, O(components) per candidate:
  one component exceeds its threshold even when every earlier slot takes its most helpful choice
  (``slack`` = sum over earlier slots of min(0, min delta), computed per component). Plain numpy:
  a generator calls it a few dozen times per instance on a few dozen rows.
* :func:`every_combination_violates` — the exact test: a pruned depth-first search over the
  combinations (a numba kernel), for the pairs the separable test cannot decide. Most instances
  never reach it, so numba is imported on its first call: loading numba and its compiled-code
  cache costs about 0.4 s of CPU per process, more than generating a 5x7 instance.
"""

from __future__ import annotations

import numpy as np


def _vector(name: str, array: np.ndarray, width: int | None = None) -> np.ndarray:
    out = np.ascontiguousarray(array, dtype=np.int64)
    if out.ndim != 1 or (width is not None and out.shape[0] != width):
        raise ValueError(f"{name} must be a 1-d array of length {width}, got shape {out.shape}")
    return out


def _matrix(name: str, array: np.ndarray, width: int) -> np.ndarray:
    out = np.ascontiguousarray(array, dtype=np.int64)
    if out.ndim != 2 or out.shape[1] != width:
        raise ValueError(f"{name} must be an (n, {width}) array, got shape {out.shape}")
    return out


def breaks_every_combination(
    base: np.ndarray, slack: np.ndarray, thresholds: np.ndarray, candidate_rows: np.ndarray
) -> np.ndarray:
    """Boolean mask over ``candidate_rows``: some component ``k`` has
    ``base[k] + slack[k] + row[k] > thresholds[k]``.

    ``base`` is the grid vector with the tested slot removed, ``slack`` the per-component sum of
    the earlier slots' most negative deltas (<= 0), ``candidate_rows`` the candidates' own
    contributions at the tested cell. True is a proof that every combination is invalid.
    """
    thresholds = _vector("thresholds", thresholds)
    width = thresholds.shape[0]
    bound = _vector("base", base, width) + _vector("slack", slack, width)
    return np.any(bound + _matrix("candidate_rows", candidate_rows, width) > thresholds, axis=1)


def every_combination_violates(
    base: np.ndarray,
    thresholds: np.ndarray,
    group_deltas: list[np.ndarray],
    node_limit: int = 50_000_000,
) -> bool | None:
    """Exact test: every combination (each group contributes nothing or one of its delta rows)
    of ``base`` plus deltas exceeds some threshold. True, False (a valid combination exists), or
    None when ``node_limit`` search nodes did not settle it."""
    from ace_gym.generators import _kernels  # imports numba: see the module docstring

    thresholds = _vector("thresholds", thresholds)
    width = thresholds.shape[0]
    rows = [_matrix("group_deltas[i]", d, width) for d in group_deltas]
    deltas = np.ascontiguousarray(np.concatenate(rows) if rows else np.zeros((0, width)), dtype=np.int64)
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(r) for r in rows])
    status, _ = _kernels.all_violate_kernel(_vector("base", base, width), thresholds, deltas, offsets, node_limit)
    return None if status < 0 else bool(status)

"""The aggregates that summaries and trainer logs share: one definition behind each name.

* :func:`mean`: the arithmetic mean, 0.0 for no values (the one averaging helper).
* :func:`episode_turns`: an episode's ``turns``, the policy turns it played: one per assistant
  message (one step of the chat env, however many tool calls it made), as the rollout loop
  counts them in ``record["usage"]["turns"]`` and logs them in ``record["turns"]``.
* :func:`group_key`: the group of an episode for ``pass@k`` and ``avg@k``: episodes of the same
  dataset, domain, instance and seed (a GRPO group, or one instance's ``--trials``).
* :func:`pass_at_k` and :func:`group_metrics`: ``pass@k`` is always the unbiased estimate of the
  chance that at least one of k samples solves the instance (Chen et al., 2021), and ``avg@k``
  the mean score, both averaged over groups. AgencyBench's "passed within k attempts" is a
  different metric, ``pass_within@k`` (:mod:`ace_gym.feedback.metrics`).
* :func:`aggregate` (over :func:`episode_fields` of the records): every metric that
  ``summary.json`` and the trainer logs both write, computed once. ``score`` is the published
  aggregate (docs/compatibility.md §4.4): a *cell* (domain, hidden slots, decoy budget) averages
  its episodes, a domain's ``score/<domain>`` averages its cells and ``score`` averages the
  domains, so a cell or domain with more episodes weighs no more than another. It equals the plain
  mean over episodes only on a balanced slice.

Imports nothing from ace_gym: the summaries (``eval.summary``), the AgencyBench metrics and the
trainer integrations all read these definitions from here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

GROUP_FIELDS = ("dataset", "domain", "instance_id", "seed")
"""The record fields whose values make an episode's :func:`group_key`."""
CELL_FIELDS = ("domain", "hidden_slots", "decoy_budget")
"""The record fields whose values make an episode's cell (the unit :func:`aggregate` averages first)."""


def mean(values: Iterable[float]) -> float:
    """The arithmetic mean of ``values``; 0.0 when there are none."""
    listed = list(values)
    return sum(listed) / len(listed) if listed else 0.0


def episode_turns(record: Mapping[str, Any]) -> int:
    """The policy turns of an episode record: ``record["usage"]["turns"]``, or the length of its
    turn log ``record["turns"]`` when the record has no usage count (the two agree in every
    record the rollout loop writes)."""
    usage = record.get("usage") or {}
    if "turns" in usage:
        return int(usage["turns"])
    return len(record.get("turns") or ())


def group_key(record: Mapping[str, Any]) -> str:
    """The ``pass@k`` group of an episode record (see :data:`GROUP_FIELDS`), as a string."""
    return json.dumps([record.get(field) for field in GROUP_FIELDS])


def pass_at_k(scores: Sequence[float], k: int) -> float:
    """The unbiased estimate of pass@k from ``n = len(scores)`` samples with ``c`` successes
    (score 1): ``1 - C(n - c, k) / C(n, k)``."""
    n, solved = len(scores), sum(score >= 1.0 for score in scores)
    if n - solved < k:
        return 1.0
    return 1.0 - math.comb(n - solved, k) / math.comb(n, k)


def group_metrics(groups: Iterable[Sequence[float]]) -> dict[str, float]:
    """``{"pass@k": ..., "avg@k": ...}`` over groups of scores, k the smallest group's size: the
    mean over groups of :func:`pass_at_k` and of the mean score. Empty for no groups."""
    listed = [list(scores) for scores in groups]
    if not listed:
        return {}
    k = min(len(scores) for scores in listed)
    return {
        f"pass@{k}": mean(pass_at_k(scores, k) for scores in listed),
        f"avg@{k}": mean(mean(scores) for scores in listed),
    }


def episode_fields(record: Mapping[str, Any]) -> dict[str, Any]:
    """What :func:`aggregate` reads of an episode record: :data:`CELL_FIELDS` (None where the
    record has no such field), ``group`` (:func:`group_key`), ``score`` and ``turns``
    (:func:`episode_turns`)."""
    return {
        **{field: record.get(field) for field in CELL_FIELDS},
        "group": group_key(record),
        "score": float(record["score"]),
        "turns": episode_turns(record),
    }


def _cell_order(cell: tuple[Any, ...]) -> tuple[tuple[bool, Any], ...]:
    """Cells sorted by their fields' values, a missing (None) value after every present one."""
    return tuple((value is None, 0 if value is None else value) for value in cell)


def trial_metrics(groups: Iterable[Sequence[float]]) -> dict[str, float]:
    """:func:`group_metrics` when every group holds at least two episodes (repeated trials or a
    GRPO group), else nothing: a single episode per instance has no ``pass@k`` to estimate."""
    listed = [list(scores) for scores in groups]
    if min((len(scores) for scores in listed), default=0) < 2:
        return {}
    return group_metrics(listed)


def aggregate(episodes: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The metrics that ``summary.json`` and the trainer logs share, of episodes as
    :func:`episode_fields` describes them (``domain``, ``hidden_slots``, ``decoy_budget``,
    ``group``, ``score``, ``turns``); empty for no episodes:

    ``episodes`` (their number); ``score``: the mean over domains of ``score/<domain>``, each the
    mean over the domain's cells (:data:`CELL_FIELDS`, sorted) of the cell's mean score (an
    episode without hidden slots or decoy budget falls in its domain's cell of unknown
    difficulty); ``turns``: mean policy turns; ``pass@k`` and ``avg@k`` over the groups
    (:func:`trial_metrics`).
    """
    listed = list(episodes)
    if not listed:
        return {}
    cells: dict[tuple[Any, ...], list[float]] = {}
    groups: dict[str, list[float]] = {}
    for episode in listed:
        cells.setdefault(tuple(episode.get(field) for field in CELL_FIELDS), []).append(float(episode["score"]))
        groups.setdefault(str(episode["group"]), []).append(float(episode["score"]))
    cell_scores: dict[str, list[float]] = {}
    for cell in sorted(cells, key=_cell_order):
        cell_scores.setdefault(str(cell[0]), []).append(mean(cells[cell]))
    per_domain = {f"score/{domain}": mean(scores) for domain, scores in cell_scores.items()}
    return {
        "episodes": len(listed),
        "score": mean(per_domain.values()),
        "turns": mean(float(episode["turns"]) for episode in listed),
        **trial_metrics(groups.values()),
        **per_domain,
    }

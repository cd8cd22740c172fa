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

"""Aggregate episode records into the paper's views: cells, domains, overall, and a text table.

Aggregation follows the published notebook (docs/compatibility.md §4.4): a *cell* is one
(domain, hidden slots, decoy budget) and averages every episode in it (trials and tool-failure
rates pooled); a domain's score is the mean of its cells' scores; the overall score is the mean
of the domains' scores. Usage (turns = policy turns as :func:`ace_gym.stats.episode_turns`
counts them, tool calls, time, tokens) is averaged over episodes; ``steps`` is the old name of
``turns``, written beside it for one release.

The names ``summary.json`` shares with the trainer logs (``episodes``, ``score``, a domain's
``score``, ``turns``, ``pass@k``, ``avg@k``) come from one function,
:func:`ace_gym.stats.aggregate`, which ``AceEvalCallback`` and ``AceMetrics`` log under ``ace/``
(:mod:`ace_gym.integrations.trainer_callback`; docs/usage.md, "Metric names").

When some episodes share an instance and seed (``--trials``; :func:`ace_gym.stats.group_key`),
``overall`` also gets ``pass@k`` and ``avg@k`` over those groups, k the smallest group's size
(:func:`ace_gym.stats.group_metrics`: the unbiased estimator the trainer logs under the same
name). AgencyBench's "passed within k attempts" is ``pass_within@k`` (:mod:`ace_gym.feedback.evaluation`).

Each benchmark (:data:`ace_gym.stacks.BENCHMARKS`) adds its metrics to the summary and its table
under the ACE table (AgencyBench's protocol metrics, the planning settings' metrics), in the
order the list gives.

Every score comes with its standard error ``score_se`` (None below two episodes), episodes taken
as independent draws: for a plain mean, the sample standard deviation over sqrt(n); for a
domain's mean of cell means, the same variance (over the domain's episodes) times the sum of the
squared episode weights; for the overall mean of domains, the root sum of the domains' squared
errors over the number of domains. 35 binary episodes at a score near 0.5 give about 0.085.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ace_gym.errors import ConfigError
from ace_gym.eval.recovery import recovery_counts, recovery_metrics
from ace_gym.runs.results import unique_records
from ace_gym.stacks import BENCHMARKS
from ace_gym.stats import aggregate, episode_fields, episode_turns, mean

USAGE_FIELDS = ("turns", "tool_calls", "time_s", "tokens")
LEGACY_USAGE_NAMES = {"steps": "turns"}
"""Old usage names written beside the new ones for one release: old name -> new name."""
TABLE_LEGEND = (
    "score     share of episodes solved (1 = every rule holds) ± its standard error; a domain's score is",
    "          the mean of its (hidden slots, decoy budget) cells, the average the mean of the domains",
    "episodes  episodes in the row; per episode: turns = policy turns, calls = tool calls,",
    "          time s = wall seconds, tokens = prompt + completion tokens (LLM policies)",
)


def _usage(record: Mapping[str, Any]) -> dict[str, float]:
    usage = record.get("usage", {})
    return {
        "turns": float(episode_turns(record)),
        "tool_calls": float(usage.get("tool_calls", 0)),
        "time_s": float(usage.get("time_s", 0.0)),
        "tokens": float(usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)),
    }


def _weighted_se(scores: Sequence[float], weights: Sequence[float]) -> float | None:
    """Standard error of ``sum(w * s)`` with the scores' sample variance; None below two scores."""
    if len(scores) < 2:
        return None
    centre = mean(scores)
    variance = sum((s - centre) ** 2 for s in scores) / (len(scores) - 1)
    return math.sqrt(variance * sum(w * w for w in weights))


def _stats(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    usages = [_usage(r) for r in records]
    scores = [float(r["score"]) for r in records]
    stats: dict[str, Any] = {
        "episodes": len(records),
        "score": mean(scores),
        "score_se": _weighted_se(scores, [1.0 / len(scores) for _ in scores]),
    }
    for name in USAGE_FIELDS:
        stats[name] = mean(u[name] for u in usages)
    for old, new in LEGACY_USAGE_NAMES.items():
        stats[old] = stats[new]
    return stats


def _recovery(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The failure-recovery metrics of records (:func:`~ace_gym.eval.recovery.recovery_metrics`)."""
    return recovery_metrics(recovery_counts(record.get("failures") or ()) for record in records)


def _rate(record: Mapping[str, Any]) -> str:
    return f"{float(record.get('tool_failure_rate') or 0.0):g}"


def _cells(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, int, int], list[Mapping[str, Any]]] = {}
    for record in records:
        cell = (str(record["domain"]), int(record["hidden_slots"]), int(record["decoy_budget"]))
        groups.setdefault(cell, []).append(record)
    return [
        {"domain": domain, "hidden_slots": hidden, "decoy_budget": budget, **_stats(group)}
        for (domain, hidden, budget), group in sorted(groups.items())
    ]


def summarize(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The summary of one policy's records.

    Returns ``{"policy", "episodes", "overall", "per_domain": {domain: stats + datasets},
    "per_failure_rate": {rate: stats + recovery}, "cells": [stats + domain, hidden_slots,
    decoy_budget], "cells_by_failure_rate": {rate: [cells of that rate's episodes]}}`` where stats
    are ``episodes``, ``score``, ``score_se``, ``turns`` (and ``steps``, its old name), ``tool_calls``, ``time_s``, ``tokens``,
    ``datasets`` lists the dataset each domain's episodes came from and recovery is ``failures``,
    ``recovered``, ``recovery_rate`` and ``turns_to_recover`` (:mod:`ace_gym.eval.recovery`; None
    where no failure was injected or recovered); ``overall`` adds ``pass@k`` and ``avg@k`` when
    episodes repeat an instance (see the module docstring). No records: policy None, score None,
    empty views. Each benchmark adds its metrics
    (:meth:`~ace_gym.benchmark.Benchmark.add_metrics`: AgencyBench's protocol metrics, the
    planning settings' ``settings``). Raises ConfigError when the records come from more than one policy.
    """
    records = unique_records(records)
    policies = sorted({str(r.get("policy")) for r in records})
    if len(policies) > 1:
        raise ConfigError("records", policies, "come from several policies; summarise one policy at a time")
    cells = _cells(records)
    shared = aggregate(episode_fields(record) for record in records)
    per_domain: dict[str, Any] = {}
    for domain in dict.fromkeys(c["domain"] for c in cells):
        domain_records = [r for r in records if r["domain"] == domain]
        domain_cells = {(c["hidden_slots"], c["decoy_budget"]): c for c in cells if c["domain"] == domain}
        stats = _stats(domain_records)
        stats["score"] = shared[f"score/{domain}"]
        weights = [
            1.0 / (len(domain_cells) * domain_cells[r["hidden_slots"], r["decoy_budget"]]["episodes"])
            for r in domain_records
        ]
        stats["score_se"] = _weighted_se([float(r["score"]) for r in domain_records], weights)
        stats["datasets"] = sorted({str(r.get("dataset")) for r in domain_records})
        per_domain[domain] = stats
    overall = _stats(list(records))
    overall.update({name: value for name, value in shared.items() if not name.startswith("score/")})
    overall["score"] = shared.get("score")  # None, not 0.0, for no episode
    domain_errors = [d["score_se"] for d in per_domain.values()]
    overall["score_se"] = (
        None
        if None in domain_errors or not domain_errors
        else math.sqrt(sum(e * e for e in domain_errors)) / len(domain_errors)
    )
    rates: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        rates.setdefault(_rate(record), []).append(record)
    summary = {
        "policy": policies[0] if policies else None,
        "episodes": len(records),
        "overall": overall,
        "per_domain": per_domain,
        "per_failure_rate": {rate: {**_stats(group), **_recovery(group)} for rate, group in sorted(rates.items())},
        "cells": cells,
        "cells_by_failure_rate": {rate: _cells(group) for rate, group in sorted(rates.items())},
    }
    for benchmark in BENCHMARKS:
        benchmark.add_metrics(summary, records)
    return summary


def _score_text(stats: Mapping[str, Any]) -> str:
    error = stats.get("score_se")
    return f"{stats['score']:.3f} ±{error:.3f}" if error is not None else f"{stats['score']:.3f}       "


def format_table(summary: Mapping[str, Any]) -> str:
    """The paper-style table: score ± standard error per domain and the average, with mean
    turns, tool calls, time and tokens, then a legend saying what each column means, then each
    benchmark's table of the summary (:meth:`~ace_gym.benchmark.Benchmark.format_table`)."""
    header = f"{'domain':<12}{'episodes':>9}{'score':>15}{'turns':>9}{'calls':>9}{'time s':>9}{'tokens':>10}"
    lines = [f"policy: {summary.get('policy')}", header, "-" * len(header)]

    def row(name: str, stats: Mapping[str, Any]) -> str:
        return (
            f"{name:<12}{stats['episodes']:>9d}{_score_text(stats):>15}{stats['turns']:>9.1f}"
            f"{stats['tool_calls']:>9.1f}{stats['time_s']:>9.3f}{stats['tokens']:>10.0f}"
        )

    for domain, stats in summary["per_domain"].items():
        lines.append(row(domain, stats))
    lines.append("-" * len(header))
    lines.append(row("average", summary["overall"]))
    if len(summary.get("per_failure_rate", {})) > 1:
        lines.append("")
        lines.append(
            "by tool-failure rate: "
            + ", ".join(
                f"{rate}: {_score_text(stats).strip()} ({stats['episodes']} ep.)"
                for rate, stats in summary["per_failure_rate"].items()
            )
        )
    recovery = [(rate, stats) for rate, stats in summary.get("per_failure_rate", {}).items() if stats.get("failures")]
    if recovery:
        lines.append(
            "recovery from injected tool failures: "
            + ", ".join(
                f"{rate}: {stats['recovered']}/{stats['failures']} recovered"
                + (f" in {stats['turns_to_recover']:.1f} turns" if stats["turns_to_recover"] is not None else "")
                for rate, stats in recovery
            )
        )
    lines.append("")
    lines.extend(TABLE_LEGEND)
    for benchmark in BENCHMARKS:
        table = benchmark.format_table(summary)
        if table is not None:
            lines += ["", table]
    return "\n".join(lines)


def dataset_label(summary: Mapping[str, Any], domain: str) -> str:
    """The dataset(s) a domain's episodes came from, as a short label (file names, not paths)."""
    return ", ".join(Path(d).name for d in summary["per_domain"][domain].get("datasets", []))


def score_grid(
    summary: Mapping[str, Any], domain: str, failure_rate: str | None = None
) -> tuple[list[int], list[int], list[list[float | None]], list[list[int]]]:
    """``(hidden-slot values, decoy-budget values, score[h][b] or None, episodes[h][b])`` of one
    domain's cells: the pooled cells, or those of one tool-failure rate (a key of
    ``summary["cells_by_failure_rate"]``). The axes are the values present in any rate's cells of
    the domain, so every rate's grid has the same shape."""
    cells = [c for c in summary["cells"] if c["domain"] == domain]
    hidden = sorted({c["hidden_slots"] for c in cells})
    budgets = sorted({c["decoy_budget"] for c in cells})
    if failure_rate is not None:
        cells = [c for c in summary["cells_by_failure_rate"][failure_rate] if c["domain"] == domain]
    scores: list[list[float | None]] = [[None] * len(budgets) for _ in hidden]
    counts = [[0] * len(budgets) for _ in hidden]
    for c in cells:
        r, b = hidden.index(c["hidden_slots"]), budgets.index(c["decoy_budget"])
        scores[r][b], counts[r][b] = c["score"], c["episodes"]
    return hidden, budgets, scores, counts

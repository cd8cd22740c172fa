"""Aggregate episode records into the paper's views: cells, domains, overall, and a text table.

Aggregation follows the published notebook (docs/compatibility.md §4.4): a *cell* is one (domain, hidden slots,
decoy budget) and averages every episode in it (trials and tool-failure rates pooled); a
domain's score is the mean of its cells' scores; the overall score is the mean of the domains'
scores. Usage (steps = policy turns, tool calls, time, tokens) is averaged over episodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ace_gym.errors import ConfigError

USAGE_FIELDS = ("steps", "tool_calls", "time_s", "tokens")


def _usage(record: Mapping[str, Any]) -> dict[str, float]:
    usage = record.get("usage", {})
    return {
        "steps": float(usage.get("turns", 0)),
        "tool_calls": float(usage.get("tool_calls", 0)),
        "time_s": float(usage.get("time_s", 0.0)),
        "tokens": float(usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)),
    }


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _stats(records: list[Mapping[str, Any]]) -> dict[str, Any]:
    usages = [_usage(r) for r in records]
    stats: dict[str, Any] = {"episodes": len(records), "score": _mean([float(r["score"]) for r in records])}
    for name in USAGE_FIELDS:
        stats[name] = _mean([u[name] for u in usages])
    return stats


def unique_records(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Records with distinct keys (the first of each key wins), in input order."""
    seen: set[Any] = set()
    out = []
    for record in records:
        if record.get("key") not in seen:
            seen.add(record.get("key"))
            out.append(record)
    return out


def summarize(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The summary of one policy's records.

    Returns ``{"policy", "episodes", "overall", "per_domain": {domain: stats}, "per_failure_rate":
    {rate: stats}, "cells": [stats + domain, hidden_slots, decoy_budget]}`` where stats are
    ``episodes``, ``score``, ``steps``, ``tool_calls``, ``time_s``, ``tokens``. Raises ConfigError
    when the records come from more than one policy.
    """
    records = unique_records(records)
    policies = sorted({str(r.get("policy")) for r in records})
    if len(policies) > 1:
        raise ConfigError("records", policies, "come from several policies; summarise one policy at a time")
    groups: dict[tuple[str, int, int], list[Mapping[str, Any]]] = {}
    for record in records:
        cell = (str(record["domain"]), int(record["hidden_slots"]), int(record["decoy_budget"]))
        groups.setdefault(cell, []).append(record)
    cells = [
        {"domain": domain, "hidden_slots": hidden, "decoy_budget": budget, **_stats(group)}
        for (domain, hidden, budget), group in sorted(groups.items())
    ]
    per_domain: dict[str, Any] = {}
    for domain in dict.fromkeys(c["domain"] for c in cells):
        domain_records = [r for r in records if r["domain"] == domain]
        stats = _stats(domain_records)
        stats["score"] = _mean([c["score"] for c in cells if c["domain"] == domain])
        per_domain[domain] = stats
    overall = _stats(list(records))
    overall["score"] = _mean([d["score"] for d in per_domain.values()])
    rates: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        rates.setdefault(f"{float(record.get('tool_failure_rate') or 0.0):g}", []).append(record)
    return {
        "policy": policies[0] if policies else None,
        "episodes": len(records),
        "overall": overall,
        "per_domain": per_domain,
        "per_failure_rate": {rate: _stats(group) for rate, group in sorted(rates.items())},
        "cells": cells,
    }


def format_table(summary: Mapping[str, Any]) -> str:
    """The paper-style table: score per domain and the average, with mean steps, time, tokens."""
    header = f"{'domain':<12}{'episodes':>9}{'score':>8}{'steps':>9}{'calls':>9}{'time s':>9}{'tokens':>10}"
    lines = [f"policy: {summary.get('policy')}", header, "-" * len(header)]

    def row(name: str, stats: Mapping[str, Any]) -> str:
        return (
            f"{name:<12}{stats['episodes']:>9d}{stats['score']:>8.3f}{stats['steps']:>9.1f}"
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
                f"{rate}: {stats['score']:.3f} ({stats['episodes']} ep.)"
                for rate, stats in summary["per_failure_rate"].items()
            )
        )
    return "\n".join(lines)


def score_grid(summary: Mapping[str, Any], domain: str) -> tuple[list[int], list[int], list[list[float | None]]]:
    """(hidden-slot values, decoy-budget values, score[h][b] or None) of one domain's cells."""
    cells = [c for c in summary["cells"] if c["domain"] == domain]
    hidden = sorted({c["hidden_slots"] for c in cells})
    budgets = sorted({c["decoy_budget"] for c in cells})
    grid: list[list[float | None]] = [[None] * len(budgets) for _ in hidden]
    for c in cells:
        grid[hidden.index(c["hidden_slots"])][budgets.index(c["decoy_budget"])] = c["score"]
    return hidden, budgets, grid

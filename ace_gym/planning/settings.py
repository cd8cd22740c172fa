"""The planning-robustness settings by name: which wrapper each applies, in which order, and the
metrics an evaluation reports for it.

Each setting is an entry of the one wrapper registry (:mod:`ace_gym.stacks`), declared here:
``ace-gym eval --wrappers unsolvable,broken,extraneous``, the registered convenience ids and the
server read it from there. Settings stack in one order whatever order they are named in: cost (innermost: it
charges the calls that reach the env), extraneous, unsolvable, broken (it classifies the agent's
next action, so it sits outside every wrapper that answers calls itself), refine (outermost: it
judges calls against the whole tool surface). A setting's metrics read the planning record of
each episode's last call (``info["apb"][key]``); see :func:`episode_apb`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import gymnasium as gym

from ace_gym.errors import ConfigError, did_you_mean
from ace_gym.planning.taxonomy import UNSOLVABLE_KINDS
from ace_gym.stats import mean
from ace_gym.wrapper_entry import Metrics, WrapperEntry

APB_INFO = "apb"
"""The ``info`` key under which planning wrappers record their perturbations, one sub-key each
(a setting's :attr:`~ace_gym.wrapper_entry.WrapperEntry.key`)."""


def _extraneous(outcomes: Sequence[Mapping[str, Any]]) -> Metrics:
    return {
        "distractor_use": mean(o.get("calls", 0) > 0 for o in outcomes),
        "distractor_calls": mean(float(o.get("calls", 0)) for o in outcomes),
        "strict_success": mean(bool(o.get("strict_success")) for o in outcomes),
    }


def _broken(outcomes: Sequence[Mapping[str, Any]]) -> Metrics:
    failed = [o for o in outcomes if o.get("failures", 0) > 0]
    metrics = {"failed_episodes": mean(o.get("failures", 0) > 0 for o in outcomes)}
    for category in range(1, 6):
        metrics[f"category_{category}"] = mean(o.get("category") == category for o in failed)
    metrics["correct"] = mean(o.get("category") in (1, 2) for o in failed)
    metrics["retries"] = mean(float(o.get("retries", 0)) for o in failed)
    metrics["recovered"] = mean(bool(o.get("recovered")) for o in failed)
    return metrics


def _unsolvable(outcomes: Sequence[Mapping[str, Any]]) -> Metrics:
    unsolvable = [o for o in outcomes if o.get("unsolvable")]
    solvable = [o for o in outcomes if not o.get("unsolvable")]
    refused = [o for o in unsolvable if o.get("refused")]
    metrics = {
        "unsolvable_share": mean(bool(o.get("unsolvable")) for o in outcomes),
        "refusal_recall": mean(bool(o.get("refused")) for o in unsolvable),
        "false_refusal_rate": mean(bool(o.get("refused")) for o in solvable),
        "reason_code_accuracy": mean(bool(o.get("code_correct")) for o in refused),
    }
    for kind in UNSOLVABLE_KINDS:
        of_kind = [o for o in unsolvable if o.get("kind") == kind]
        if of_kind:
            metrics[f"recall_{kind}"] = mean(bool(o.get("refused")) for o in of_kind)
    return metrics


def _cost(outcomes: Sequence[Mapping[str, Any]]) -> Metrics:
    return {
        "cost": mean(float(o.get("total", 0.0)) for o in outcomes),
        "reference_cost": mean(float(o.get("reference", 0.0)) for o in outcomes),
        "efficiency": mean(float(o.get("efficiency", 0.0)) for o in outcomes),
    }


def _refine(outcomes: Sequence[Mapping[str, Any]]) -> Metrics:
    proposals = sum(o.get("proposals", 0) for o in outcomes)
    before = sum(o.get("correct_before", 0) for o in outcomes)
    flagged = proposals - before
    return {
        "proposals": float(proposals),
        "correct_before": before / proposals if proposals else 0.0,
        "correct_after": sum(o.get("correct_after", 0) for o in outcomes) / proposals if proposals else 0.0,
        "improvement_rate": sum(o.get("improved", 0) for o in outcomes) / flagged if flagged else 0.0,
        "degradation_rate": sum(o.get("degraded", 0) for o in outcomes) / before if before else 0.0,
    }


PLANNING_WRAPPERS: tuple[WrapperEntry, ...] = (
    WrapperEntry(
        "cost", "ace_gym.planning.cost_annotated_tools:CostAnnotatedTools", 210, {}, "apb.cost", _cost, setting=True
    ),
    WrapperEntry(
        "extraneous",
        "ace_gym.planning.extraneous_tools:ExtraneousTools",
        220,
        {"n": 4},
        "apb.extraneous_tools",
        _extraneous,
        setting=True,
    ),
    WrapperEntry(
        "unsolvable",
        "ace_gym.planning.unsolvable_mix:UnsolvableMix",
        230,
        {"p_unsolvable": 0.5},
        "apb.unsolvable",
        _unsolvable,
        setting=True,
    ),
    WrapperEntry(
        "broken",
        "ace_gym.planning.broken_tool:BrokenTool",
        240,
        {"target": "auto"},
        "apb.broken_tool",
        _broken,
        setting=True,
    ),
    WrapperEntry(
        "refine",
        "ace_gym.planning.refine:Refine",
        250,
        {"critic": "rules", "mode": "metric"},
        "apb.refine",
        _refine,
        setting=True,
    ),
)
"""APB's entries of the wrapper registry (:data:`ace_gym.stacks.WRAPPERS`), in stacking order
(innermost first): every one a setting ``ace-gym eval --wrappers`` may name. Their orders sit
between failure injection (100) and the chat adapter (300)."""

SETTINGS: dict[str, WrapperEntry] = {entry.name: entry for entry in PLANNING_WRAPPERS}
"""Every setting by name, in stacking order (innermost first): the planning rows of the wrapper
registry (:mod:`ace_gym.stacks` lists the same entries)."""


def check_settings(names: Iterable[str], field: str = "settings") -> tuple[str, ...]:
    """``names`` validated and put in stacking order (duplicates dropped); ConfigError naming
    ``field`` with a "did you mean" for an unknown name."""
    listed = [names] if isinstance(names, str) else list(names)
    for name in listed:
        if name not in SETTINGS:
            raise ConfigError(field, name, f"known settings: {', '.join(SETTINGS)}{did_you_mean(name, SETTINGS)}")
    return tuple(name for name in SETTINGS if name in listed)


def apply_settings(
    env: gym.Env, names: Iterable[str], options: Mapping[str, Mapping[str, Any]] | None = None
) -> gym.Env:
    """``env`` wrapped in the named settings, in stacking order; ``options[name]`` are keyword
    arguments of that setting's wrapper, over the setting's defaults."""
    options = options or {}
    for name in check_settings(names):
        setting = SETTINGS[name]
        env = setting.wrapper(env, **{**setting.defaults, **dict(options.get(name, {}))})
    return env


def episode_apb(record: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each setting's last planning record (``info["apb"][key]``) in an evaluation record, read
    over every call in order (the calls a turn ran through a chat adapter included): a setting's
    entry is its state after the last call it saw, even when an outer wrapper answered the last
    call of the episode."""
    found: dict[str, dict[str, Any]] = {}
    for turn in record.get("turns", ()):
        info = turn.get("info", {})
        for step in [*info.get("calls", ()), info]:
            for key, values in step.get(APB_INFO, {}).items():
                found.setdefault(key, {}).update(values)
    return found


def setting_metrics(names: Iterable[str], records: Sequence[Mapping[str, Any]]) -> dict[str, Metrics]:
    """Each named setting's metrics over the episode records (one policy's)."""
    apb = [episode_apb(record) for record in records]
    found = {}
    for name in check_settings(names):
        setting = SETTINGS[name]
        outcomes = [a[setting.key] for a in apb if setting.key in a]
        found[name] = {"episodes": float(len(outcomes))} | (setting.metrics(outcomes) if setting.metrics else {})
    return found


def summarize_settings(records: Sequence[Mapping[str, Any]]) -> dict[str, Metrics]:
    """The metrics of every setting the records were run under (their ``settings`` field);
    empty when none was."""
    names = {name for record in records for name in record.get("settings", ())}
    return setting_metrics(names, records) if names else {}


def format_metrics(metrics: Mapping[str, Mapping[str, float]]) -> str:
    """One line per setting: ``<setting>  name value, ...``."""
    return "\n".join(
        f"{name:<12}"
        + ", ".join(
            f"{key} {value:.3f}" if key != "episodes" else f"episodes {value:.0f}" for key, value in found.items()
        )
        for name, found in metrics.items()
    )


def add_metrics(summary: dict[str, Any], records: Sequence[Mapping[str, Any]]) -> None:
    """Add ``summary["settings"]``, the metrics of the settings the records were run under
    (:func:`summarize_settings`), to an ACE summary, in place; nothing when none was."""
    found = summarize_settings(records)
    if found:
        summary["settings"] = found


def format_table(summary: Mapping[str, Any]) -> str | None:
    """The settings' lines of an ACE summary (:func:`format_metrics`) under a title, or None
    when it has none."""
    return f"planning settings:\n{format_metrics(summary['settings'])}" if summary.get("settings") else None

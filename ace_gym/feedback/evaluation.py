"""What AgencyBench's protocol adds to ``ace-gym eval``: flags, episode settings, record fields,
summary metrics and their table (docs/feedback_rounds.md).

``--feedback-rounds K`` plays every episode under :class:`~ace_gym.feedback.FeedbackRounds` with
up to K attempts (K - 1 rounds of feedback); ``--scenario [STAGES]`` plays every instance as an
``ACE-Scenario`` (its stages get K attempts each when ``--feedback-rounds`` is given too);
``--threshold T`` and ``--feedback STYLE`` set the pass threshold and the feedback style. The
summary then carries, under ``overall`` and per domain, ``s_avg``, ``att``, ``pass_within@1``
... ``pass_within@K`` (passed within k attempts; ``pass@k`` is only ever the unbiased estimator
over trials, :mod:`ace_gym.stats`), ``rise``, ``e_att``, ``e_tok`` (:mod:`ace_gym.feedback.metrics`;
shares in [0, 1]), and for scenarios ``per_stage`` and ``scenario_pass_within@k``.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from ace_gym.errors import ConfigError, integer
from ace_gym.feedback.metrics import (
    PASS_CONVENTION,
    PASS_WITHIN,
    agency_summary,
    pass_within_key,
    scenario_pass,
    stage_summary,
)
from ace_gym.feedback.rounds import ACE_THRESHOLD, TRAINING_REWARD, resolve_threshold
from ace_gym.feedback.texts import FEEDBACK_STYLES

METRIC_KEYS = ("tasks", "s_avg", "s_avg_of", "att", "rise", "e_att", "e_tok", "pass_convention", "tokens_source")
"""The keys :func:`add_metrics` copies from :func:`ace_gym.feedback.metrics.agency_summary` (besides ``pass_within@k``)."""
SCENARIO_PASS_WITHIN = "scenario_pass_within@"
"""The prefix of the share of scenarios passing every stage within k attempts (``scenario_pass_within@1`` ...)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the protocol's flags to the ``eval`` sub-command."""
    group = parser.add_argument_group("AgencyBench's protocol (docs/feedback_rounds.md)")
    group.add_argument(
        "--feedback-rounds",
        type=int,
        default=None,
        metavar="K",
        help="up to K attempts per episode (per stage with --scenario), feedback between them",
    )
    group.add_argument(
        "--threshold",
        default=None,
        metavar="T",
        help="pass threshold in [0, 1], or 'paper' (AgencyBench's 0.6) (default 1.0: ACE's own verdict)",
    )
    group.add_argument("--feedback", default=None, choices=FEEDBACK_STYLES, help="feedback style (default diagnostic)")
    group.add_argument(
        "--scenario",
        type=int,
        nargs="?",
        const=5,
        default=None,
        metavar="STAGES",
        help="play each instance as a scenario of ascending stages (default 5)",
    )


def spec_settings(args: argparse.Namespace) -> dict[str, dict[str, Any] | None]:
    """``scenario`` and ``feedback_rounds`` keyword arguments of the episode specs the flags ask
    for (only what is given, so that unset flags keep the envs' defaults and the episode keys);
    ConfigError for a bad value or ``--threshold`` / ``--feedback`` without a protocol."""
    rounds: dict[str, Any] = {}
    if args.feedback_rounds is not None:
        rounds["max_attempts"] = integer("feedback-rounds", args.feedback_rounds, minimum=1)
    if args.threshold is not None:
        rounds["threshold"] = _threshold(args.threshold)
    if args.feedback is not None:
        rounds["feedback"] = args.feedback
    if args.scenario is not None:
        stages = integer("scenario", args.scenario, minimum=1)
        # the reward is named, so that a run played for the rubric's share, the default before
        # issue 38, is not resumed with the verdict
        return {"scenario": {"stages": stages, **rounds, "final_reward": TRAINING_REWARD}, "feedback_rounds": None}
    if rounds and "max_attempts" not in rounds:
        raise ConfigError("threshold/feedback", rounds, "apply with --feedback-rounds K or --scenario")
    if rounds:  # named, so that a run that relied on 0.6, the default before 1.0, is not resumed at 1.0
        rounds.setdefault("threshold", ACE_THRESHOLD)
        rounds["final_reward"] = TRAINING_REWARD  # likewise
    return {"scenario": None, "feedback_rounds": rounds or None}


def _threshold(text: str) -> float:
    """``--threshold``'s value: a number in [0, 1] or a name of THRESHOLD_NAMES; ConfigError else."""
    try:
        value: float | str = float(text)
    except ValueError:
        value = text
    return resolve_threshold(value)


def protocol_fields(env: Any, info: Mapping[str, Any]) -> dict[str, Any]:
    """The record fields of a finished episode under the protocol: ``feedback_rounds`` (the
    wrapper's last log) and ``scenario`` (the scenario's :meth:`scenario_log`, read from the env
    when it is at hand, else from the last info). Empty for a plain episode."""
    fields: dict[str, Any] = {}
    if "feedback_rounds" in info:
        fields["feedback_rounds"] = info["feedback_rounds"]
    if env is not None and getattr(env, "has_wrapper_attr", None) and env.has_wrapper_attr("scenario_log"):
        fields["scenario"] = env.get_wrapper_attr("scenario_log")()
    elif "scenario" in info:
        fields["scenario"] = info["scenario"]
    return fields


def uses_protocol(records: Sequence[Mapping[str, Any]]) -> bool:
    return any("feedback_rounds" in record or "scenario" in record for record in records)


def add_metrics(summary: dict[str, Any], records: Sequence[Mapping[str, Any]]) -> None:
    """Add the protocol's metrics to a :func:`~ace_gym.eval.summary.summarize` result, in place:
    :data:`METRIC_KEYS` and ``pass_within@k`` under ``overall`` and each domain (tasks pooled), and
    for scenarios ``per_stage`` and ``scenario_pass_within@k`` under ``overall``. Nothing for plain runs."""
    if not uses_protocol(records):
        return
    for domain, stats in summary["per_domain"].items():
        stats.update(_metrics([r for r in records if r["domain"] == domain]))
    summary["overall"].update(_metrics(records))
    scenarios = [r for r in records if "scenario" in r]
    if scenarios:
        summary["per_stage"] = stage_summary(scenarios)
        for k in range(1, _attempts(summary["overall"]) + 1):
            summary["overall"][f"{SCENARIO_PASS_WITHIN}{k}"] = scenario_pass(scenarios, k)


def _metrics(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    metrics = agency_summary(records)
    return {key: value for key, value in metrics.items() if key in METRIC_KEYS or key.startswith(PASS_WITHIN)}


def _attempts(stats: Mapping[str, Any]) -> int:
    return sum(1 for key in stats if key.startswith(PASS_WITHIN))


def format_table(summary: Mapping[str, Any]) -> str | None:
    """The protocol's table (S_avg, Att, Within1..K, Rise, E_att, E_tok per domain and pooled, per
    stage for scenarios) with a legend, or None when the summary has none of its metrics."""
    overall = summary["overall"]
    if "s_avg" not in overall:
        return None
    k_max = _attempts(overall)
    passes = [f"Within{k}" for k in range(1, k_max + 1)]
    header = f"{'domain':<12}{'tasks':>7}{'S_avg':>8}{'Att':>6}" + "".join(f"{p:>8}" for p in passes)
    header += f"{'Rise':>8}{'E_att':>8}{'E_tok':>8}"
    lines = ["AgencyBench metrics (per task, pooled)", header, "-" * len(header)]

    def row(name: str, stats: Mapping[str, Any]) -> str:
        cells = f"{name:<12}{stats['tasks']:>7d}{_percent(stats['s_avg']):>8}{stats['att']:>6.2f}"
        cells += "".join(f"{_percent(stats.get(pass_within_key(k))):>8}" for k in range(1, k_max + 1))
        return cells + f"{_percent(stats['rise']):>8}{_percent(stats['e_att']):>8}{_number(stats['e_tok']):>8}"

    for domain, stats in summary["per_domain"].items():
        lines.append(row(domain, stats))
    lines += ["-" * len(header), row("all", overall)]
    if summary.get("per_stage"):
        lines += ["", "per stage position (scenarios)"]
        for stage in summary["per_stage"]:
            lines.append(row(f"stage {stage['stage']}", {**stage, "rise": None, "e_att": None, "e_tok": None}))
        lines.append(
            "scenarios passing every stage: "
            + ", ".join(
                f"within {k}: {_percent(overall[f'{SCENARIO_PASS_WITHIN}{k}']).strip()}" for k in range(1, k_max + 1)
            )
        )
    lines += [
        "",
        f"S_avg  mean rubric score of the {overall['s_avg_of']} attempt, %; Att  attempts used per task (K on a failure)",
        f"Within<k>  share of tasks passed {PASS_CONVENTION} (pass_within@k), %; Rise  (WithinK - Within1) / Within1, %",
        f"E_att  S_avg / Att, %; E_tok  S_avg (%) per million tokens ({overall['tokens_source']} token counts)",
    ]
    return "\n".join(lines)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.3g}"

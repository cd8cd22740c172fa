"""Training-time validation: score the model being trained on a fixed slice of ACE envs.

Usage (any ``transformers.Trainer``, including TRL's)::

    trainer = GRPOTrainer(...)
    trainer.add_callback(AceEvalCallback(trainer, every_steps=50, domains=("course", "meal")))
    trainer.train()   # logs ace/score, ace/score/<domain>, ace/parse_error_rate, ace/pass@k... (summary_metrics)

A logged name that ``summary.json`` also writes means the same there, computed by the same
function (:func:`ace_gym.stats.aggregate`): ``ace/score`` is the summary's ``overall.score`` (the
mean of the domains' means of their (hidden slots, decoy budget) cells' means, not the plain mean
over episodes), ``ace/score/<domain>`` a domain's ``score``, and so on (:func:`summary_path`).
The names the summary does not write are :data:`TRAINER_ONLY_METRICS`.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from transformers import TrainerCallback

from ace_gym.agents.llm.hf_engine import HFChatEngine
from ace_gym.domains import DOMAIN_NAMES, get_domain
from ace_gym.errors import EngineUnavailableError, integer, probability
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.eval.recovery import failure_log, recovery_counts, recovery_metrics
from ace_gym.instance import resolve_dataset
from ace_gym.stats import aggregate, episode_fields
from ace_gym.stats import pass_at_k as pass_at_k  # its home was here: still importable from this module

logger = logging.getLogger(__name__)

EVAL_FAILED_METRIC = "ace/eval_failed"
"""Logged as 1.0 (instead of any ``ace/score``) at a step whose evaluation could not run."""
TRAINER_ONLY_METRICS = {
    "parse_error_rate": "share of policy turns the adapter could not read as a tool call",
    "recovery_rate": "recovered / injected tool failures, all failure rates pooled (summary.json: per rate)",
    "turns_to_recover": "mean turns to recover a recovered failure, all rates pooled (summary.json: per rate)",
    "eval_failed": "1.0 at a step whose evaluation could not run, logged instead of every other metric",
}
"""The trainer metrics ``summary.json`` does not write (name without prefix or ``/fail=<rate>``
-> meaning); every other name is the summary's, at :func:`summary_path`."""


def summary_path(name: str) -> tuple[str, ...]:
    """Where ``summary.json`` writes the value of the trainer metric ``name`` (without its prefix):
    ``score/<domain>`` -> ``("per_domain", domain, "score")``; ``<metric>/fail=<rate>`` ->
    ``("per_failure_rate", rate, metric)``; any other -> ``("overall", name)``."""
    metric, _, scope = name.partition("/")
    if scope.startswith("fail="):
        return ("per_failure_rate", scope.removeprefix("fail="), metric)
    if metric == "score" and scope:
        return ("per_domain", scope, "score")
    return ("overall", name)


def parse_error_turn(turn: Mapping[str, Any]) -> bool:
    """Whether the adapter could not read the turn: no tool call found, or a call or fragment
    that did not parse (the turns that get a corrective message)."""
    info = turn.get("info", {})
    return bool(info.get("parse_errors")) or not (info.get("calls") or info.get("skipped_calls"))


def episode_summary(record: Mapping[str, Any]) -> dict[str, Any]:
    """What :func:`summary_metrics` reads of a rollout record: :func:`ace_gym.stats.episode_fields`
    (``domain``, ``hidden_slots``, ``decoy_budget``, ``group``: same dataset, domain, instance and
    seed, ``score``, ``turns``), ``parse_error_turns`` (:func:`parse_error_turn`),
    ``tool_failure_rate`` and the failure-recovery counts (:data:`ace_gym.eval.recovery.COUNT_KEYS`)."""
    turns = record["turns"]
    return {
        **episode_fields(record),
        "tool_failure_rate": float(record.get("tool_failure_rate") or 0.0),
        "parse_error_turns": sum(parse_error_turn(turn) for turn in turns),
        **recovery_counts(failure_log(turns)),
    }


def summary_metrics(summaries: Iterable[Mapping[str, Any]], prefix: str = "ace") -> dict[str, float]:
    """Training metrics of episode summaries (:func:`episode_summary`), only those defined:

    what ``summary.json`` writes for the same episodes (:func:`ace_gym.stats.aggregate`, at
    :func:`summary_path`): ``<prefix>/episodes``; ``<prefix>/score``, the mean over domains of
    ``<prefix>/score/<domain>``, each the mean of its (hidden slots, decoy budget) cells' mean
    scores; ``<prefix>/turns``, mean policy turns (:func:`ace_gym.stats.episode_turns`);
    ``<prefix>/pass@k`` and ``<prefix>/avg@k`` over groups (episodes sharing ``group``) when
    every group holds two or more; ``<prefix>/recovery_rate/fail=<rate>`` and
    ``<prefix>/turns_to_recover/fail=<rate>`` (:mod:`ace_gym.eval.recovery`) where failures were
    injected (turns only when the summaries count them); and the :data:`TRAINER_ONLY_METRICS`
    ``<prefix>/parse_error_rate`` (share of turns that could not be read) and the pooled
    ``<prefix>/recovery_rate`` and ``<prefix>/turns_to_recover``.
    """
    summaries = list(summaries)
    if not summaries:
        return {}
    turns = sum(int(s["turns"]) for s in summaries)
    metrics = {f"{prefix}/{name}": float(value) for name, value in aggregate(summaries).items()}
    metrics[f"{prefix}/parse_error_rate"] = (
        sum(int(s["parse_error_turns"]) for s in summaries) / turns if turns else 0.0
    )
    by_rate: dict[float, list[Mapping[str, Any]]] = defaultdict(list)
    for summary in summaries:
        by_rate[float(summary.get("tool_failure_rate") or 0.0)].append(summary)
    for suffix, group in [("", summaries), *((f"/fail={rate:g}", by_rate[rate]) for rate in sorted(by_rate))]:
        recovery = recovery_metrics(group)
        for name in ("recovery_rate", "turns_to_recover"):
            if recovery[name] is not None:
                metrics[f"{prefix}/{name}{suffix}"] = recovery[name]
    return metrics


def ace_metrics(records: Iterable[Mapping[str, Any]], prefix: str = "ace") -> dict[str, float]:
    """:func:`summary_metrics` of rollout records (``run_episodes`` output)."""
    return summary_metrics((episode_summary(record) for record in records), prefix)


def validation_specs(
    domains: Sequence[str],
    episodes_per_domain: int,
    *,
    dataset: str = "5x5",
    seed: int = 0,
    max_turns: int = 30,
    env_kwargs: Mapping[str, Any] | None = None,
    tool_failure_rates: Sequence[float] = (0.0,),
) -> list[EpisodeSpec]:
    """A fixed, seeded slice of ACE episodes: per domain, ``episodes_per_domain`` distinct
    instances drawn without replacement from ``numpy.random.default_rng((seed, domain index))``,
    each played at every rate of ``tool_failure_rates``."""
    episodes_per_domain = integer("episodes_per_domain", episodes_per_domain, minimum=1)
    specs = []
    for domain in domains:
        get_domain(domain)  # raises ConfigError with a suggestion for an unknown name
        size = len(resolve_dataset(dataset, domain))
        rng = np.random.default_rng((seed, DOMAIN_NAMES.index(domain)))
        indices = rng.choice(size, size=min(episodes_per_domain, size), replace=False)
        specs += [
            EpisodeSpec.of(
                domain,
                dataset,
                instance_index=int(index),
                seed=seed + k,
                tool_failure_rate=probability("tool_failure_rates", rate),
                env_kwargs=dict(env_kwargs or {}),
                max_turns=max_turns,
            )
            for k, index in enumerate(sorted(indices))
            for rate in tool_failure_rates
        ]
    return specs


class AceEvalCallback(TrainerCallback):
    """Every ``every_steps`` optimizer steps, play a fixed slice of ACE episodes with the live
    model and log :func:`ace_metrics` (:func:`summary_metrics`) through ``trainer.log`` (so every reporting integration
    and ``state.log_history`` receive them).

    The model is the one the Trainer hands to callbacks (no copy, no reload), wrapped in an
    :class:`~ace_gym.agents.llm.hf_engine.HFChatEngine` built anew for each evaluation with the same
    ``seed``, so evaluations differ only by the weights. ``engine_options`` go to the engine
    (default greedy decoding, ``max_new_tokens=512``). The slice is :func:`validation_specs`
    (``domains``, ``episodes_per_domain``, ``dataset``, ``seed``, ``max_turns``, ``env_kwargs``,
    ``tool_failure_rates``),
    each episode played ``group_size`` times (pass@k and avg@k over those groups when
    ``group_size`` >= 2, as ``summary.json`` writes them over ``--trials``; sample, i.e. give
    ``engine_options={"temperature": ...}``, for them to mean anything).
    Under data parallelism every process runs the slice (a sharded model needs all of them) and
    the Trainer logs from the main process. ``metrics_history`` keeps ``(step, metrics)`` pairs.

    An evaluation whose engine cannot load or reach the model
    (:class:`~ace_gym.errors.EngineUnavailableError`, e.g. a tokenizer path that does not load) is
    no score: the step logs a warning and :data:`EVAL_FAILED_METRIC` = 1.0, no ``ace/score``, keeps
    ``(step, message)`` in ``failures`` and training goes on.
    """

    def __init__(
        self,
        trainer: Any,
        *,
        every_steps: int = 100,
        domains: Sequence[str] = DOMAIN_NAMES,
        episodes_per_domain: int = 4,
        dataset: str = "5x5",
        seed: int = 0,
        max_turns: int = 30,
        env_kwargs: Mapping[str, Any] | None = None,
        tool_failure_rates: Sequence[float] = (0.0,),
        batch_size: int = 32,
        group_size: int = 1,
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        every_steps = integer("every_steps", every_steps, minimum=1)
        self.trainer = trainer
        self.every_steps = every_steps
        slice_specs = validation_specs(
            domains,
            episodes_per_domain,
            dataset=dataset,
            seed=seed,
            max_turns=max_turns,
            env_kwargs=env_kwargs,
            tool_failure_rates=tool_failure_rates,
        )
        self.specs = [member for spec in slice_specs for member in spec.group(group_size)]
        self.seed = seed
        self.batch_size = batch_size
        self.engine_options = {"temperature": 0.0, "max_new_tokens": 512, **dict(engine_options or {})}
        self.metrics_history: list[tuple[int, dict[str, float]]] = []
        self.failures: list[tuple[int, str]] = []
        self._last_step = -1

    def evaluate(self, model: Any, tokenizer: Any) -> dict[str, float]:
        """Play the slice with ``model`` and ``tokenizer``; return the metrics (does not log)."""
        engine = HFChatEngine(model, tokenizer, seed=self.seed, **self.engine_options)
        return ace_metrics(run_episodes(self.specs, engine, batch_size=self.batch_size))

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        step = state.global_step
        if step == self._last_step or step % self.every_steps != 0:
            return
        self._last_step = step
        tokenizer = kwargs.get("processing_class") or kwargs.get("tokenizer") or self.trainer.processing_class
        try:
            metrics = self.evaluate(kwargs.get("model") or self.trainer.model, tokenizer)
        except EngineUnavailableError as error:
            logger.warning("ACE evaluation at step %d could not run, no score logged: %s", step, error)
            self.failures.append((step, str(error)))
            metrics = {EVAL_FAILED_METRIC: 1.0}
        else:
            self.metrics_history.append((step, metrics))
        should_log = control.should_log  # trainer.log clears it; keep the step's own training log
        self.trainer.log(dict(metrics))
        control.should_log = should_log

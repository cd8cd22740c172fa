"""Training-time validation: score the model being trained on a fixed slice of ACE envs.

Usage (any ``transformers.Trainer``, including TRL's)::

    trainer = GRPOTrainer(...)
    trainer.add_callback(AceEvalCallback(trainer, every_steps=50, domains=("course", "meal")))
    trainer.train()   # logs ace/score, ace/score/<domain>, ace/turns, ace/parse_error_rate
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from transformers import TrainerCallback

from ace_gym.agents.llm.hf_engine import HFChatEngine
from ace_gym.domains import DOMAIN_NAMES, get_domain
from ace_gym.errors import integer
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.instance import resolve_dataset


def parse_error_turn(turn: Mapping[str, Any]) -> bool:
    """Whether the adapter could not read the turn: no tool call found, or a call or fragment
    that did not parse (the turns that get a corrective message)."""
    info = turn.get("info", {})
    return bool(info.get("parse_errors")) or not (info.get("calls") or info.get("skipped_calls"))


def ace_metrics(records: Iterable[Mapping[str, Any]], prefix: str = "ace") -> dict[str, float]:
    """Validation metrics of episode records (``run_episodes`` output).

    ``<prefix>/score``: mean score; ``<prefix>/score/<domain>``: mean score per domain;
    ``<prefix>/turns``: mean assistant turns per episode; ``<prefix>/parse_error_rate``: share of
    turns the adapter could not read (:func:`parse_error_turn`); ``<prefix>/episodes``: count.
    """
    records = list(records)
    if not records:
        return {}
    by_domain: dict[str, list[float]] = defaultdict(list)
    for record in records:
        by_domain[record["domain"]].append(float(record["score"]))
    turns = [turn for record in records for turn in record["turns"]]
    metrics = {
        f"{prefix}/score": float(np.mean([float(r["score"]) for r in records])),
        f"{prefix}/turns": float(np.mean([len(r["turns"]) for r in records])),
        f"{prefix}/parse_error_rate": float(np.mean([parse_error_turn(t) for t in turns])) if turns else 0.0,
        f"{prefix}/episodes": float(len(records)),
    }
    metrics.update({f"{prefix}/score/{domain}": float(np.mean(scores)) for domain, scores in sorted(by_domain.items())})
    return metrics


def validation_specs(
    domains: Sequence[str],
    episodes_per_domain: int,
    *,
    dataset: str = "5x5",
    seed: int = 0,
    max_turns: int = 30,
    env_kwargs: Mapping[str, Any] | None = None,
) -> list[EpisodeSpec]:
    """A fixed, seeded slice of ACE episodes: per domain, ``episodes_per_domain`` distinct
    instances drawn without replacement from ``numpy.random.default_rng((seed, domain index))``."""
    episodes_per_domain = integer("episodes_per_domain", episodes_per_domain, minimum=1)
    specs = []
    for domain in domains:
        get_domain(domain)  # raises ConfigError with a suggestion for an unknown name
        size = len(resolve_dataset(dataset, domain))
        rng = np.random.default_rng((seed, DOMAIN_NAMES.index(domain)))
        indices = rng.choice(size, size=min(episodes_per_domain, size), replace=False)
        specs += [
            EpisodeSpec(
                domain,
                dataset,
                instance_index=int(index),
                seed=seed + k,
                env_kwargs=dict(env_kwargs or {}),
                max_turns=max_turns,
            )
            for k, index in enumerate(sorted(indices))
        ]
    return specs


class AceEvalCallback(TrainerCallback):
    """Every ``every_steps`` optimizer steps, play a fixed slice of ACE episodes with the live
    model and log :func:`ace_metrics` through ``trainer.log`` (so every reporting integration
    and ``state.log_history`` receive them).

    The model is the one the Trainer hands to callbacks (no copy, no reload), wrapped in an
    :class:`~ace_gym.agents.llm.hf_engine.HFChatEngine` built anew for each evaluation with the same
    ``seed``, so evaluations differ only by the weights. ``engine_options`` go to the engine
    (default greedy decoding, ``max_new_tokens=512``). The slice is :func:`validation_specs`
    (``domains``, ``episodes_per_domain``, ``dataset``, ``seed``, ``max_turns``, ``env_kwargs``).
    Under data parallelism every process runs the slice (a sharded model needs all of them) and
    the Trainer logs from the main process. ``metrics_history`` keeps ``(step, metrics)`` pairs.
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
        batch_size: int = 32,
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        every_steps = integer("every_steps", every_steps, minimum=1)
        self.trainer = trainer
        self.every_steps = every_steps
        self.specs = validation_specs(
            domains, episodes_per_domain, dataset=dataset, seed=seed, max_turns=max_turns, env_kwargs=env_kwargs
        )
        self.seed = seed
        self.batch_size = batch_size
        self.engine_options = {"temperature": 0.0, "max_new_tokens": 512, **dict(engine_options or {})}
        self.metrics_history: list[tuple[int, dict[str, float]]] = []
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
        metrics = self.evaluate(kwargs.get("model") or self.trainer.model, tokenizer)
        self.metrics_history.append((step, metrics))
        should_log = control.should_log  # trainer.log clears it; keep the step's own training log
        self.trainer.log(dict(metrics))
        control.should_log = should_log

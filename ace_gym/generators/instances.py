"""Generate one certified instance: retry attempts with derived seeds under a time budget."""

from __future__ import annotations

import logging
import time
from collections import Counter

from ace_gym.dataset_schema import Instance
from ace_gym.errors import integer, number
from ace_gym.generators.builder import AttemptFailed, build_instance
from ace_gym.generators.certificate import certify
from ace_gym.generators.config import GenerationError, InstanceConfig
from ace_gym.instance import check_instance

logger = logging.getLogger(__name__)


def generate_instance(
    domain: str,
    *,
    rows: int = 5,
    cols: int = 7,
    hidden_slots: int,
    decoy_budget: int,
    candidates_per_slot: int = 25,
    seed: int,
    time_budget: float = 120.0,
    max_attempts: int = 10_000,
) -> Instance:
    """A validated, certified instance; a pure function of the arguments before ``time_budget``.

    Attempt ``n`` draws everything from a numpy Generator seeded by (seed, domain, rows, cols,
    hidden_slots, decoy_budget, candidates_per_slot, n); the first attempt that succeeds is the
    instance. Its certificate (see :func:`ace_gym.generators.certify`) is stored in
    ``meta["certificate"]``, the seed and attempt in ``meta["generator"]``.

    Raises ConfigError for an impossible configuration (unknown domain, more hidden slots than
    cells, negative values, ...), GenerationError when no attempt succeeded within
    ``max_attempts`` attempts or ``time_budget`` seconds (it lists the failure reasons).
    """
    config = InstanceConfig(domain, rows, cols, hidden_slots, decoy_budget, candidates_per_slot, seed)
    number("time_budget", time_budget, minimum=0, note="(seconds)")
    integer("max_attempts", max_attempts, minimum=1)
    started = time.perf_counter()
    reasons: Counter[str] = Counter()
    for attempt in range(max_attempts):
        try:
            instance = build_instance(config, config.attempt_rng(attempt))
        except AttemptFailed as failed:
            reasons[failed.reason] += 1
            if time.perf_counter() - started > time_budget:
                break
            continue
        check_instance(instance, config.domain_spec, f"generator({config.describe()})")
        certificate = certify(instance)
        if not certificate.holds:  # the construction guarantees it: a failure is a bug
            raise AssertionError(
                f"generated instance {config.describe()} fails its certificate: {certificate.problems}"
            )
        if attempt:
            logger.info("%s: attempt %d succeeded after %s", config.describe(), attempt, dict(reasons))
        # extra meta keys, after the published ones (the model was validated when it was built)
        meta = instance.meta.model_copy(
            update={"certificate": certificate.as_dict(), "generator": {"seed": config.seed, "attempt": attempt}}
        )
        return instance.model_copy(update={"meta": meta})
    raise GenerationError(config, sum(reasons.values()), time.perf_counter() - started, reasons)

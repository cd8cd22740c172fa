"""One meaning per metric name: ``summary.json`` and the trainer logs read the same records alike.

The same episode records go to :func:`ace_gym.eval.summary.summarize` (what ``summary.json``
gets) and to the trainer-side metrics (:func:`~ace_gym.integrations.trainer_callback.ace_metrics`,
what ``AceEvalCallback`` logs, and :class:`~ace_gym.integrations.trl.AceMetrics` over the
``rollout_func`` summaries). Every name both write must hold the same value: ``pass@k`` the
unbiased estimator over the groups, ``turns`` the policy turns, ``score`` and ``episodes``.
AgencyBench's "passed within k attempts" is ``pass_within@k``, written only for runs whose
episodes have attempts (feedback rounds, scenarios), never by the trainer.

Both sides take the shared names from :func:`ace_gym.stats.aggregate`: ``score`` is the mean of
the domains' means of their (hidden slots, decoy budget) cells' means (the paper's notebook) on
either side, so an unbalanced slice (cells and domains of different sizes) gives the same value
to both; every other trainer name is listed in ``TRAINER_ONLY_METRICS``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")

import ace_gym
from ace_gym import stats
from ace_gym.agents import GreedyRevise
from ace_gym.envs import AceEnv
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.eval.summary import summarize
from ace_gym.integrations.trainer_callback import (
    EVAL_FAILED_METRIC,
    TRAINER_ONLY_METRICS,
    ace_metrics,
    episode_summary,
    pass_at_k,
    summary_path,
)
from ace_gym.integrations.trl import AceMetrics, environment_factory
from ace_gym.stats import CELL_FIELDS, mean
from ace_gym.stats import pass_at_k as stats_pass_at_k

SHARED = {"score", "turns", "episodes", "pass@2", "avg@2"}
"""Names both sides must write for the records below (so the comparison cannot pass vacuously)."""


def _turn(calls: int = 1) -> dict[str, Any]:
    return {"action": "", "reward": 0.0, "info": {"calls": [{}] * calls, "parse_errors": [], "skipped_calls": 0}}


def _record(domain: str, cell: int, trial: int, attempts: Sequence[float] | None, score: float) -> dict[str, Any]:
    """A record of one episode of instance ``cell`` of ``domain`` (its own cell), with the
    attempt scores of feedback rounds when ``attempts`` is given."""
    turns = [_turn() for _ in range(2 + trial + cell)]
    record: dict[str, Any] = {
        "key": f"{domain}|{cell}|{trial}",
        "policy": "hand",
        "dataset": "5x5",
        "domain": domain,
        "instance_id": f"{domain}-{cell}",
        "hidden_slots": 15,
        "decoy_budget": cell,
        "seed": 0,
        "trial": trial,
        "tool_failure_rate": 0.0,
        "score": score,
        "usage": {"turns": len(turns), "tool_calls": len(turns), "prompt_tokens": 0, "completion_tokens": 0},
        "failures": [],
        "messages": [],
        "turns": turns,
    }
    if attempts is not None:
        record["feedback_rounds"] = {"scores": list(attempts), "max_attempts": 2, "threshold": 1.0}
    return record


def _rounds_records() -> list[dict[str, Any]]:
    """Two instances per domain, two trials each, up to two attempts per trial. Course cell 0:
    solved at attempt 1 / failed twice; cell 2: solved at attempt 2 / failed twice. Within two
    attempts half the tasks pass; every group holds a solved trial, so the unbiased pass@2 is 1."""
    out = []
    for domain in ("course", "meal"):
        out += [
            _record(domain, 0, 0, (1.0,), 1.0),
            _record(domain, 0, 1, (0.2, 0.4), 0.4),
            _record(domain, 2, 0, (0.3, 1.0), 1.0),
            _record(domain, 2, 1, (0.1, 0.2), 0.2),
        ]
    return out


def _unbalanced_records() -> list[dict[str, Any]]:
    """Cells and domains of different sizes, two trials per instance. Course: cell 0 holds two
    instances, all four episodes solved; cell 2 one instance, both episodes failed; so course's
    score is 0.5 (the mean of its cells) where its six episodes average 2/3. Meal: one instance,
    one trial of two solved."""
    out = [
        {**_record("course", 0, trial, None, 1.0), "instance_id": f"course-0{copy}", "key": f"course|0{copy}|{trial}"}
        for copy in ("a", "b")
        for trial in (0, 1)
    ]
    out += [_record("course", 2, trial, None, 0.0) for trial in (0, 1)]
    return out + [_record("meal", 0, trial, None, score) for trial, score in ((0, 1.0), (1, 0.0))]


def _plain_records() -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "feedback_rounds"} for r in _rounds_records()]


def _played_records() -> list[dict[str, Any]]:
    """Real rollout records: GreedyRevise under feedback rounds and injected tool failures, two
    trials of two instances (two cells) per domain."""
    specs = [
        member
        for domain in ("course", "meal")
        for index in (30, 33)
        for member in EpisodeSpec.of(
            domain, instance_index=index, tool_failure_rate=0.3, feedback_rounds={"max_attempts": 2, "threshold": 1.0}
        ).group(2)
    ]
    return list(run_episodes(specs, GreedyRevise(), batch_size=4))


def _trainer_logs(records: Sequence[Mapping[str, Any]]) -> list[dict[str, float]]:
    """What AceEvalCallback logs and what AceMetrics logs over rollout_func's summaries, both
    without their prefixes."""
    logged: dict[str, float] = {}
    AceMetrics()(
        [None] * len(records),
        [None] * len(records),
        log_metric=logged.__setitem__,
        ace_episode=[episode_summary(r) for r in records],
    )
    callback = {name.removeprefix("ace/"): value for name, value in ace_metrics(records).items()}
    train = {name.removeprefix("ace/train/"): value for name, value in logged.items()}
    return [callback, train]


_MISSING = object()


def _at(summary: Mapping[str, Any], path: Sequence[str]) -> Any:
    """The value at ``path`` in ``summary``, or ``_MISSING``."""
    node: Any = summary
    for step in path:
        if not isinstance(node, Mapping) or step not in node:
            return _MISSING
        node = node[step]
    return node


def _shared_pairs(summary: Mapping[str, Any], logs: Mapping[str, float]) -> dict[str, tuple[Any, float]]:
    """Each trainer metric that summary.json also writes: name -> (summary's value, trainer's)."""
    pairs = {}
    for name, value in logs.items():
        written = _at(summary, summary_path(name))
        if written is not _MISSING:
            pairs[name] = (written, value)
    return pairs


def _keys(tree: Any) -> set[str]:
    """Every mapping key anywhere in ``tree``."""
    if isinstance(tree, Mapping):
        return {str(k) for k in tree} | {k for v in tree.values() for k in _keys(v)}
    if isinstance(tree, list):
        return {k for v in tree for k in _keys(v)}
    return set()


@pytest.mark.parametrize("make_records", [_rounds_records, _plain_records, _played_records, _unbalanced_records])
def test_summary_and_trainer_logs__every_shared_name_has_the_same_value(make_records: Any) -> None:
    records = make_records()
    summary = summarize(records)
    for logs in _trainer_logs(records):
        pairs = _shared_pairs(summary, logs)
        assert SHARED <= set(pairs), f"not written by both: {SHARED - set(pairs)}"
        for name, (written, logged) in pairs.items():
            assert written == pytest.approx(logged), name
        assert not any("pass_within" in name for name in logs)


def test_pass_at_k__is_the_unbiased_estimator_and_pass_within_counts_attempts() -> None:
    summary = summarize(_rounds_records())
    overall = summary["overall"]
    assert overall["pass@2"] == pytest.approx(stats_pass_at_k([1.0, 0.4], 2)) == 1.0  # a solved trial per group
    assert overall["pass_within@1"] == 0.25 and overall["pass_within@2"] == 0.5  # tasks passed by attempt k
    assert overall["turns"] == overall["steps"]  # the old name of turns, for one release
    assert pass_at_k is stats_pass_at_k  # the old import path still works


def test_pass_within__appears_only_where_attempts_are_rounds() -> None:
    plain = summarize(_plain_records())
    assert not any(key.startswith(("pass_within@", "scenario_pass_within@")) for key in _keys(plain))
    assert not any(key.startswith("pass@") for key in _keys(plain) - {"pass@2"})
    assert "pass@2" in plain["overall"] and all("pass@2" not in d for d in plain["per_domain"].values())
    rounds = summarize(_rounds_records())
    assert {"pass_within@1", "pass_within@2"} <= set(rounds["overall"]) & set(rounds["per_domain"]["course"])
    single = summarize([r for r in _plain_records() if r["trial"] == 0])  # no trials: no groups to estimate over
    assert not any(key.startswith("pass@") for key in _keys(single))


def test_score__is_the_mean_of_domains_of_cells_on_both_sides_of_an_unbalanced_slice() -> None:
    records = _unbalanced_records()
    summary = summarize(records)
    assert summary["per_domain"]["course"]["score"] == 0.5 != mean(r["score"] for r in records[:6])
    assert summary["overall"]["score"] == 0.5
    for logs in _trainer_logs(records):
        assert (logs["score"], logs["score/course"], logs["score/meal"]) == (0.5, 0.5, 0.5)


@pytest.mark.parametrize("make_records", [_rounds_records, _played_records, _unbalanced_records])
def test_trainer_logs__every_name_is_the_summarys_or_a_listed_trainer_only_one(make_records: Any) -> None:
    records = make_records()
    summary = summarize(records)
    for logs in _trainer_logs(records):
        for name in logs:
            written = _at(summary, summary_path(name))
            if written is _MISSING:
                assert name.partition("/")[0] in TRAINER_ONLY_METRICS, f"{name}: not in summary.json, not listed"
            else:
                assert written == pytest.approx(logs[name]), name
    assert EVAL_FAILED_METRIC.removeprefix("ace/") in TRAINER_ONLY_METRICS
    assert all(isinstance(meaning, str) and meaning for meaning in TRAINER_ONLY_METRICS.values())


def test_single_trials__neither_side_writes_pass_at_k() -> None:
    records = [r for r in _unbalanced_records() if r["trial"] == 0]  # one episode per instance
    summary = summarize(records)
    assert not any(key.startswith(("pass@", "avg@")) for key in summary["overall"])
    for logs in _trainer_logs(records):
        assert not any(name.startswith(("pass@", "avg@")) for name in logs)


def test_trl_environment_episode__carries_the_cell_the_score_averages() -> None:
    environment = environment_factory(["course"])["course"]()
    environment.reset(dataset="5x5", instance_index=30, seed=0)
    _, info = AceEnv("course", "5x5").reset(options={"instance_index": 30})
    assert {field: environment.episode[field] for field in CELL_FIELDS} == {field: info[field] for field in CELL_FIELDS}


_AVERAGING = re.compile(r"def _?mean\(|sum\(([^()]+)\) */ *len\(\1\)")
"""A definition of a mean, or a mean spelt out as ``sum(x) / len(x)``."""


def test_averaging__is_defined_once_in_stats() -> None:
    package = Path(ace_gym.__file__).parent
    twins = [
        f"{path.relative_to(package)}:{number}: {line.strip()}"
        for path in sorted(package.rglob("*.py"))
        if path != Path(stats.__file__)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _AVERAGING.search(line)
    ]
    assert not twins, "average with ace_gym.stats.mean:\n" + "\n".join(twins)

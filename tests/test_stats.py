"""The shared aggregates: one mean, one count of turns, one pass@k (issue 28)."""

from __future__ import annotations

import pytest

from ace_gym.stats import episode_turns, group_key, group_metrics, mean, pass_at_k


def test_mean__of_values_and_of_nothing() -> None:
    assert mean([1.0, 2.0, 6.0]) == 3.0 and mean(x > 1 for x in (1, 2, 3, 4)) == 0.75
    assert mean([]) == 0.0 and mean(iter(())) == 0.0


def test_episode_turns__reads_the_usage_count_else_the_turn_log() -> None:
    assert episode_turns({"usage": {"turns": 3}, "turns": [{}, {}, {}]}) == 3
    assert episode_turns({"turns": [{}, {}]}) == 2  # a record built without usage
    assert episode_turns({}) == 0


def test_group_metrics__pass_at_k_and_avg_at_k_over_groups_of_the_smallest_size() -> None:
    assert pass_at_k([1, 0, 0, 0], 2) == pytest.approx(1 - 3 / 6)
    metrics = group_metrics([[1.0, 0.0, 0.0], [0.0, 0.5]])
    assert metrics == {"pass@2": pytest.approx(pass_at_k([1, 0, 0], 2) / 2), "avg@2": pytest.approx((1 / 3 + 0.25) / 2)}
    assert group_metrics([]) == {}
    record = {"dataset": "5x5", "domain": "meal", "instance_id": "m1", "seed": 0, "trial": 3}
    assert group_key(record) == group_key({**record, "trial": 0}) != group_key({**record, "seed": 1})

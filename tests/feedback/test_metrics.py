"""AgencyBench's metrics: the paper's arithmetic, Att, both Pass@k conventions, tokens."""

from __future__ import annotations

from typing import Any

import pytest

from ace_gym.errors import ConfigError
from ace_gym.feedback.metrics import (
    Attempts,
    agency_summary,
    att,
    e_att,
    e_tok,
    episode_tokens,
    pass_within_attempts,
    pass_within_feedback_rounds,
    rise,
    s_avg,
    scenario_pass,
    stage_summary,
    tasks_of,
    tokens,
)


def _record(scores: list[float], max_attempts: int = 2, threshold: float = 0.6, **extra: Any) -> dict[str, Any]:
    return {"feedback_rounds": {"scores": scores, "max_attempts": max_attempts, "threshold": threshold}, **extra}


def _paper_pass_records() -> list[dict[str, Any]]:
    """32 tasks as in GPT-5.2's row: 9 pass at attempt 1, 8 more at attempt 2, 15 never."""
    return [_record([0.7])] * 9 + [_record([0.3, 0.8])] * 8 + [_record([0.1, 0.4])] * 15


def test_e_att__reproduces_the_papers_38_7_from_s_56_5_and_att_1_46() -> None:
    assert round(e_att(56.5, 1.46), 1) == 38.7
    assert round(e_att(0.565, 1.46), 3) == 0.387  # the same in shares


def test_e_tok__reproduces_the_papers_11_3_from_s_46_4_and_4_1_million_tokens() -> None:
    assert round(e_tok(46.4, 4.1e6), 1) == 11.3  # type: ignore[arg-type]


def test_rise__reproduces_the_papers_88_9_percent_from_9_of_32_to_17_of_32() -> None:
    assert round(100 * rise(9 / 32, 17 / 32), 1) == 88.9  # type: ignore[operator]
    tasks = [task for record in _paper_pass_records() for task in tasks_of(record)]
    first, second = pass_within_attempts(tasks, 1), pass_within_attempts(tasks, 2)
    assert (round(100 * first, 1), round(100 * second, 1)) == (28.1, 53.1)
    summary = agency_summary(_paper_pass_records())
    assert summary["pass_within@1"] == 9 / 32 and summary["pass_within@2"] == 17 / 32
    assert round(100 * summary["rise"], 1) == 88.9


def test_rise__is_undefined_when_nothing_passes_at_first() -> None:
    assert rise(0.0, 0.5) is None


def test_attempts__a_score_exactly_at_the_threshold_passes() -> None:
    assert Attempts((0.6,), 2, 0.6).passed_at == 1
    assert Attempts((3 / 5,), 2, 0.6).passed_at == 1  # a rubric of 3 met items out of 5
    assert Attempts((0.59, 0.6), 2, 0.6).passed_at == 2
    assert Attempts((0.599999,), 2, 0.6).passed_at is None


def test_att__counts_k_on_failure_and_j_on_a_pass_at_attempt_j() -> None:
    assert Attempts((0.1, 0.2), 2, 0.6).attempts_used == 2
    assert Attempts((0.1,), 3, 0.6).attempts_used == 3  # ended early without a pass: still K
    assert Attempts((0.1, 0.9), 3, 0.6).attempts_used == 2
    assert Attempts((0.9,), 3, 0.6).attempts_used == 1
    tasks = [Attempts((0.9,), 2, 0.6), Attempts((0.1, 0.9), 2, 0.6), Attempts((0.1, 0.2), 2, 0.6)]
    assert att(tasks) == (1 + 2 + 2) / 3


def test_pass_conventions__feedback_rounds_are_attempts_minus_one_on_hand_built_logs() -> None:
    tasks = [
        Attempts((0.9,), 3, 0.6),
        Attempts((0.1, 0.7), 3, 0.6),
        Attempts((0.1, 0.2, 0.6), 3, 0.6),
        Attempts((0.1, 0.2, 0.3), 3, 0.6),
    ]
    assert [pass_within_attempts(tasks, k) for k in (1, 2, 3)] == [0.25, 0.5, 0.75]
    assert [pass_within_feedback_rounds(tasks, f) for f in (0, 1, 2)] == [0.25, 0.5, 0.75]


def test_pass_within_attempts__refuses_k_beyond_the_attempts_allowed() -> None:
    with pytest.raises(ConfigError, match="exceeds"):
        pass_within_attempts([Attempts((0.1, 0.2), 2, 0.6)], 3)
    with pytest.raises(ConfigError):
        pass_within_attempts([Attempts((0.1,), 2, 0.6)], 0)
    with pytest.raises(ConfigError):
        pass_within_feedback_rounds([Attempts((0.1,), 2, 0.6)], -1)


def test_s_avg__final_and_best_attempts_are_named_and_differ_when_a_retry_scores_lower() -> None:
    tasks = [Attempts((0.5, 0.4), 2, 0.6), Attempts((0.8,), 2, 0.6)]
    assert s_avg(tasks, "final") == pytest.approx((0.4 + 0.8) / 2)
    assert s_avg(tasks, "best") == pytest.approx((0.5 + 0.8) / 2)
    with pytest.raises(ConfigError):
        s_avg(tasks, "median")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("scores", "max_attempts", "threshold"),
    [((), 2, 0.6), ((0.1, 0.2, 0.3), 2, 0.6), ((1.5,), 2, 0.6), ((0.1,), 0, 0.6), ((0.1,), 2, 1.5)],
)
def test_attempts__rejects_impossible_logs(scores: tuple[float, ...], max_attempts: int, threshold: float) -> None:
    with pytest.raises(ConfigError):
        Attempts(scores, max_attempts, threshold)


def test_tasks_of__reads_plain_feedback_round_and_scenario_records() -> None:
    assert tasks_of({"score": 1.0}) == [Attempts((1.0,), 1, 1.0)]
    assert tasks_of(_record([0.2, 0.7])) == [Attempts((0.2, 0.7), 2, 0.6)]
    scenario = {"scenario": {"stages_log": [{"scores": [1.0], "max_attempts": 2, "threshold": 1.0}] * 3}}
    assert len(tasks_of(scenario)) == 3
    unreached = {"scenario": {"stages_log": [{"scores": [], "max_attempts": 2, "threshold": 1.0}]}}
    assert tasks_of(unreached) == [Attempts((0.0,), 2, 1.0)]  # opened, never submitted: a failure


def test_scenario_views__per_stage_and_per_scenario_pass() -> None:
    def stage(*scores: float) -> dict[str, Any]:
        return {"scores": list(scores), "max_attempts": 2, "threshold": 1.0}

    records = [
        {"scenario": {"stages_log": [stage(1.0), stage(0.5, 1.0)]}},
        {"scenario": {"stages_log": [stage(1.0), stage(0.5, 0.5)]}},
    ]
    stages = stage_summary(records)
    assert [s["pass_within@1"] for s in stages] == [1.0, 0.0]
    assert [s["pass_within@2"] for s in stages] == [1.0, 0.5]
    assert [s["att"] for s in stages] == [1.0, 2.0]
    assert (scenario_pass(records, 1), scenario_pass(records, 2)) == (0.0, 0.5)


def test_tokens__prefer_the_engines_usage_and_label_the_proxy() -> None:
    engine = {"usage": {"prompt_tokens": 900, "completion_tokens": 100}, "messages": []}
    assert episode_tokens(engine) == (1000, "engine")
    messages = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "grid"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "done", "arguments": "{}"}}]},
        {"role": "tool", "content": "stop"},
    ]
    scripted = {"usage": {"prompt_tokens": 0, "completion_tokens": 0}, "messages": messages}
    count, source = episode_tokens(scripted)
    assert source == "proxy" and count > 0
    longer = {**scripted, "messages": [*messages, {"role": "user", "content": "again"}, messages[2]]}
    assert episode_tokens(longer)[0] > 2 * count  # the second turn's prompt re-reads the history
    assert tokens([engine, engine]).source == "engine"
    assert tokens([engine, scripted]).source == "mixed"
    assert tokens([scripted]).source == "proxy"


def test_agency_summary__keys_and_efficiencies() -> None:
    records = [_record([0.7], usage={"turns": 4, "time_s": 2.0, "prompt_tokens": 1_000_000, "completion_tokens": 0})]
    records.append(_record([0.2, 0.5], usage={"turns": 8, "time_s": 4.0, "prompt_tokens": 3_000_000}))
    summary = agency_summary(records)
    assert summary["s_avg"] == pytest.approx(0.6) and summary["att"] == 1.5
    assert summary["e_att"] == pytest.approx(0.4)
    assert summary["e_tok"] == pytest.approx(0.6 / 2.0)  # 2 M tokens per episode
    assert (summary["turns"], summary["wall_time_s"], summary["tokens_source"]) == (6.0, 3.0, "engine")
    assert summary["pass_convention"] == "within k attempts"
    assert agency_summary([{"score": 1.0}])["rise"] is None  # one attempt: no rise

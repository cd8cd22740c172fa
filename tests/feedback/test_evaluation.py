"""``ace-gym eval --feedback-rounds K --threshold T`` and ``--scenario``: specs, records, summary, table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ace_gym.agents import GreedyRevise
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.exit_codes import EXIT_CONFIG
from ace_gym.feedback.metrics import tasks_of
from ace_gym.runs.results import read_records
from tests.eval.test_cli import one_error_line, run_cli

H15 = ["--hidden-slots", "15"]  # 5 instances per domain


def test_run_episodes__greedy_revise_reads_the_feedback_message_of_a_chat_stack() -> None:
    specs = [
        EpisodeSpec.of("course", instance_index=index, feedback_rounds={"max_attempts": 2, "threshold": 1.0})
        for index in range(20, 35)
    ]
    records = list(run_episodes(specs, GreedyRevise(), batch_size=4))
    passed_at = [tasks_of(record)[0].passed_at for record in records]
    assert passed_at.count(2) > passed_at.count(1) > 0  # the revise step saw the feedback and fixed grids
    user_messages = [m for m in records[0]["messages"] if m["role"] == "user"][1:]
    assert all(m["content"].startswith("Status: submission") for m in user_messages)


def test_episode_spec__plain_keys_are_unchanged_and_protocols_change_them() -> None:
    plain = EpisodeSpec.of("meal", instance_index=3)
    assert "feedback_rounds" not in plain.key("p") and "scenario" not in plain.key("p")
    rounds = EpisodeSpec.of("meal", instance_index=3, feedback_rounds={"max_attempts": 2})
    scenario = EpisodeSpec.of("meal", instance_index=3, scenario={"stages": 5})
    assert len({plain.key("p"), rounds.key("p"), scenario.key("p")}) == 3


def test_episode_spec__the_threshold_and_the_reward_are_named_in_the_key() -> None:
    """A spec that relied on a default (threshold 0.6 until issue 29; the rubric's share as the
    reward until issue 38) gets a key no record played under the old default has."""
    explicit = EpisodeSpec.of("meal", instance_index=3, feedback_rounds={"max_attempts": 2, "threshold": 0.6})
    assert explicit.key("p").endswith(
        '{"kwargs": {"final_reward": "pass_discount", "max_attempts": 2, "threshold": 0.6}, '
        '"name": "feedback_rounds"}]}'
    )
    default = EpisodeSpec.of("meal", instance_index=3, feedback_rounds={"max_attempts": 2})
    rounds = dict(default.stack.wrappers)["feedback_rounds"]
    assert rounds == {"max_attempts": 2, "threshold": 1.0, "final_reward": "pass_discount"}
    assert '"threshold": 1.0' in default.key("p")
    rubric = EpisodeSpec.of("meal", instance_index=3, scenario={"stages": 2, "final_reward": "final"})
    assert rubric.stack.env_kwargs["final_reward"] == "final" and '"final_reward": "final"' in rubric.key("p")
    assert EpisodeSpec.of("meal", scenario={"stages": 2}).stack.env_kwargs["final_reward"] == "pass_discount"


def test_eval__a_run_that_relied_on_the_old_default_is_not_resumed_at_the_new_one(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "rounds"
    args = ["--policy", "greedy-revise", "--domains", "course", *H15, "--out", str(out)]
    assert run_cli(*args, "--feedback-rounds", "2") == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["settings"]["feedback_rounds"] == {
        "max_attempts": 2,
        "threshold": 1.0,
        "final_reward": "pass_discount",
    }
    # as main wrote a default run before issue 29 (threshold 0.6) and before issue 38 (the rubric's share)
    for written in ({"max_attempts": 2}, {"max_attempts": 2, "threshold": 1.0}):
        summary["run"]["settings"]["feedback_rounds"] = written
        (out / "summary.json").write_text(json.dumps(summary))
        assert run_cli(*args, "--feedback-rounds", "2") == EXIT_CONFIG
        assert "holds another run" in one_error_line(capsys)
    paper = tmp_path / "paper"
    assert run_cli(*args[:-1], str(paper), "--feedback-rounds", "2", "--threshold", "paper") == 0
    assert json.loads((paper / "summary.json").read_text())["run"]["settings"]["feedback_rounds"]["threshold"] == 0.6


def test_eval__feedback_rounds_summary_has_the_papers_metrics_overall_and_per_domain(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "rounds"
    args = ["--policy", "greedy-revise", "--domains", "course,meal", *H15, "--out", str(out)]
    assert run_cli(*args, "--feedback-rounds", "2", "--threshold", "1.0", "--feedback", "names") == 0
    table = capsys.readouterr().out
    assert "AgencyBench metrics" in table and "Within2" in table and "E_tok" in table
    summary = json.loads((out / "summary.json").read_text())
    for stats in [summary["overall"], *summary["per_domain"].values()]:
        assert {"s_avg", "att", "pass_within@1", "pass_within@2", "rise", "e_att", "e_tok"} <= set(stats)
        assert 1.0 <= stats["att"] <= 2.0 and stats["pass_within@1"] <= stats["pass_within@2"]
    assert summary["run"]["settings"]["feedback_rounds"] == {
        "max_attempts": 2,
        "threshold": 1.0,
        "feedback": "names",
        "final_reward": "pass_discount",
    }
    records = list(read_records(out / "episodes.jsonl"))
    assert all(r["feedback_rounds"]["threshold"] == 1.0 for r in records)
    assert run_cli(*args, "--feedback-rounds", "3", "--threshold", "1.0", "--feedback", "names") == EXIT_CONFIG
    assert "holds another run" in one_error_line(capsys)


def test_eval__scenario_summary_has_per_stage_metrics(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "scenario"
    assert run_cli("--policy", "solver", "--domains", "travel", *H15, "--out", str(out), "--scenario", "3") == 0
    assert "per stage position" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert [stage["stage"] for stage in summary["per_stage"]] == [1, 2, 3]
    assert summary["per_stage"][0]["pass_within@1"] == 1.0  # the solver never fails a first stage
    assert {"s_avg", "att", "pass_within@1", "rise", "e_att", "e_tok", "scenario_pass_within@1"} <= set(
        summary["overall"]
    )
    records = list(read_records(out / "episodes.jsonl"))
    assert all(len(r["scenario"]["stages_log"]) == 3 for r in records)


def test_eval__plain_runs_have_no_protocol_metrics(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "plain"
    assert run_cli("--policy", "solver", "--domains", "meal", "--hidden-slots", "1", "--out", str(out)) == 0
    assert "AgencyBench" not in capsys.readouterr().out
    assert "s_avg" not in json.loads((out / "summary.json").read_text())["overall"]


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (["--threshold", "0.5"], "threshold/feedback"),
        (["--feedback-rounds", "0"], "feedback-rounds"),
        (["--feedback-rounds", "2", "--threshold", "1.5"], "threshold"),
        (["--feedback-rounds", "2", "--threshold", "papers"], "threshold"),
        (["--scenario", "0"], "scenario"),
    ],
)
def test_eval__bad_protocol_flags_are_config_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture, flags: list[str], field: str
) -> None:
    assert run_cli("--policy", "solver", "--out", str(tmp_path / "bad"), *flags) == EXIT_CONFIG
    assert field in one_error_line(capsys)

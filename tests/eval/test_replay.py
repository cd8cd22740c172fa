"""Golden-trajectory replay: every recorded episode (scripted, tiny model, planning settings,
feedback rounds, scenarios) replays identically, and a changed parser, reward or dataset is caught
at its first differing turn (``ace-gym replay``, ``ReplayPolicy``)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from gymnasium.envs.registration import load_env_creator

import ace_gym.wrappers.chat_adapter
from ace_gym.cli import main
from ace_gym.errors import ConfigError
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.eval.replay import (
    OLD_ENTRY_POINTS,
    ReplayDiverged,
    ReplayPolicy,
    compare_records,
    current_entry_points,
    replay_record,
    replay_spec,
)
from ace_gym.exit_codes import EXIT_CONFIG, EXIT_MALFORMED, EXIT_OK, EXIT_REPLAY_MISMATCH
from ace_gym.parsing import parse_turn
from ace_gym.policies import make_policy
from ace_gym.runs.results import read_records
from ace_gym.text import MAX_JSON_DEPTH
from ace_gym.tools.state import EpisodeState
from tests.core_helpers import nested_dict

SPECS = (
    EpisodeSpec.of("course", instance_index=0, tool_failure_rate=0.3, max_turns=200),
    EpisodeSpec.of("meal", instance_index=1, seed=3, settings=("broken",), max_turns=100),
    EpisodeSpec.of("travel", instance_index=2, feedback_rounds={"max_attempts": 2}, max_turns=60),
    EpisodeSpec.of("course", instance_index=2, scenario={"stages": 2}, max_turns=60),
)


def played(specs: Sequence[EpisodeSpec], policy: Any) -> list[dict[str, Any]]:
    """The records of ``specs`` under ``policy`` as they read back from a JSON line."""
    return [json.loads(json.dumps(record)) for record in run_episodes(specs, policy)]


def write_run(directory: Path, records: Sequence[dict[str, Any]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return directory


def replay_cli(*args: str) -> int:
    return main(["replay", *args])


@pytest.mark.parametrize("policy", ["solver", "solver-batch", "greedy", "random"])
def test_replay_record__reproduces_scripted_episodes_of_every_protocol(policy: str) -> None:
    records = played(SPECS, make_policy(policy))
    assert {bool(r.get("feedback_rounds")) for r in records} == {True, False} and any("scenario" in r for r in records)
    assert [replay_record(record) for record in records] == [None] * len(records)


def test_replay_record__a_turn_of_several_calls_in_compact_mode_replays_exactly() -> None:
    specs = [EpisodeSpec.of(d, instance_index=34, env_kwargs={"observation": "compact"}) for d in ("course", "travel")]
    records = played(specs, make_policy("solver-batch"))
    assert [r["score"] for r in records] == [1.0, 1.0]
    assert all(max(len(turn["action"]["tool_calls"]) for turn in r["turns"]) > 1 for r in records)
    assert [replay_record(record) for record in records] == [None, None]


def test_records__carry_each_turns_action_and_the_replay_fields() -> None:
    (record,) = played(SPECS[:1], make_policy("solver"))
    replay = record["replay"]
    assert set(replay) == {"spec", "version", "dataset_sha256"} and len(replay["dataset_sha256"]) == 64
    assert replay["spec"] == json.loads(SPECS[0].to_json())  # one description: the stack, instance, seed, trial
    stack = replay["spec"]["stack"]
    assert stack["env_id"] == "ACE-course-v0" and [w["name"] for w in stack["wrappers"]] == [
        "failure_injection",
        "chat_adapter",
        "step_budget",
    ]
    assert stack["wrappers"][0]["kwargs"] == {"rate": 0.3} and replay["spec"]["seed"] == 0
    assistant = [m for m in record["messages"] if m["role"] == "assistant"]
    assert [t["action"]["tool_calls"][0]["function"] for t in record["turns"]] == [
        m["tool_calls"][0]["function"] for m in assistant
    ]


def test_records__the_recorded_stack_is_each_episodes_own_when_stacks_differ_only_in_options() -> None:
    specs = [
        EpisodeSpec.of("course", instance_index=0, max_turns=7),
        EpisodeSpec.of("course", instance_index=1, seed=4, max_turns=7),  # the same stack, another episode
        EpisodeSpec.of("course", instance_index=0, max_turns=8),
        EpisodeSpec.of("course", instance_index=0, max_turns=7, failure_injection={"failure_modes": ["timeout"]}),
    ]
    records = {record["key"]: record for record in played(specs, make_policy("random"))}
    for spec in specs:
        recorded = records[spec.key("random")]["replay"]["spec"]
        assert EpisodeSpec.from_json(json.dumps(recorded)) == spec
        assert replay_record(records[spec.key("random")]) is None


def test_replay_cli__replays_a_scripted_eval_run_exactly(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "run"
    flags = ["--domains", "course,meal", "--hidden-slots", "1,5", "--decoy-budgets", "0"]
    assert (
        main(
            ["eval", "--no-progress", "--policy", "greedy", "--out", str(out), *flags, "--tool-failure-rates", "0,0.3"]
        )
        == 0
    )
    capsys.readouterr()
    assert replay_cli(str(out)) == EXIT_OK
    assert capsys.readouterr().out.strip().endswith("8 identical, 0 differ")
    key = next(read_records(out / "episodes.jsonl"))["key"]
    assert replay_cli(str(out), "--episode", key) == EXIT_OK
    assert "replayed 1 episodes" in capsys.readouterr().out


def test_replay__a_changed_parser_is_caught_at_the_first_turn_it_reads_differently(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (record,) = played(SPECS[:1], make_policy("solver"))
    first_set = next(
        i for i, t in enumerate(record["turns"]) if "set" in t["action"]["tool_calls"][0]["function"]["name"]
    )

    def no_set_calls(action: Any, tool_format: str) -> Any:  # a parser that loses set_* calls
        parsed = parse_turn(action, tool_format)
        return parsed._replace(calls=tuple(c for c in parsed.calls if "set" not in c.name))

    monkeypatch.setattr(ace_gym.wrappers.chat_adapter, "parse_turn", no_set_calls)
    mismatch = replay_record(record)
    assert mismatch is not None and mismatch.turn == first_set
    assert f"at turn {first_set}" in mismatch.describe()


def test_replay__a_changed_reward_is_caught_at_the_last_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    (record,) = played(SPECS[:1], make_policy("solver"))
    assert record["score"] == 1.0
    monkeypatch.setattr(EpisodeState, "final_violation", lambda self: "a changed rule")  # the reward code
    mismatch = replay_record(record)
    assert mismatch is not None and (mismatch.turn, mismatch.field) == (len(record["turns"]) - 1, "reward")
    assert (mismatch.recorded, mismatch.replayed) == (1.0, 0.0)


def test_replay_cli__exits_6_naming_the_first_differing_turn(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = write_run(tmp_path / "run", played(SPECS[:2], make_policy("solver")))
    monkeypatch.setattr(EpisodeState, "final_violation", lambda self: "a changed rule")  # the reward code
    assert replay_cli(str(run)) == EXIT_REPLAY_MISMATCH
    out = capsys.readouterr().out
    assert "reward differs: recorded 1.0, replayed 0.0" in out and out.strip().endswith("0 identical, 2 differ")


def test_replay__a_changed_dataset_file_is_caught_before_the_first_turn(tmp_path: Path) -> None:
    from ace_gym.instance import bundled_dataset_path

    copy = tmp_path / "course.json"
    copy.write_bytes(gzip.decompress(bundled_dataset_path("5x5", "course").read_bytes()))
    (record,) = played([EpisodeSpec.of("course", str(copy), instance_index=0, max_turns=100)], make_policy("solver"))
    assert replay_record(record) is None
    copy.write_bytes(copy.read_bytes() + b"\n")  # same instances, another file
    mismatch = replay_record(record)
    assert mismatch is not None and (mismatch.turn, mismatch.field) == (None, "dataset_sha256")


EDITED_TOP_LEVEL = [
    ("seed", 7),
    ("dataset", "5x7"),
    ("domain", "meal"),
    ("settings", ["broken"]),
    ("trial", 3),
    ("tool_failure_rate", 0.0),
    ("max_turns", 5),
]


@pytest.mark.parametrize(("field", "edited"), EDITED_TOP_LEVEL)
def test_replay_cli__a_record_whose_top_level_spec_fields_were_edited_exits_6_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture, field: str, edited: Any
) -> None:
    """Issue 40: ``ace-gym replay`` exited 0 on them (it rebuilt the spec from ``replay`` alone)."""
    (record,) = played(SPECS[:1], make_policy("solver"))
    record[field] = edited
    assert replay_cli(str(write_run(tmp_path / "run", [record]))) == EXIT_REPLAY_MISMATCH
    assert f"before the first turn, {field} differs: recorded {edited!r}" in capsys.readouterr().out


def test_replay__an_episode_that_goes_on_past_its_record_diverges() -> None:
    (record,) = played(SPECS[:1], make_policy("solver"))
    record["turns"] = record["turns"][:3]
    mismatch = replay_record(record)
    assert mismatch is not None and (mismatch.turn, mismatch.field) == (3, "turns")


def test_replay_policy__plays_records_again_inside_run_episodes() -> None:
    records = played(SPECS, make_policy("greedy"))
    policy = ReplayPolicy(records)
    replayed = {r["key"]: r for r in run_episodes(SPECS, policy, name="greedy", batch_size=4)}
    assert all(compare_records(record, replayed[record["key"]]) is None for record in records)
    record = replayed[SPECS[0].key("greedy")]
    record["turns"][0]["info"]["turn"] = 99
    with pytest.raises(ReplayDiverged, match="at turn 0, info differs"):
        list(run_episodes(SPECS[:1], ReplayPolicy([record]), name="greedy"))


def test_replay_cli__a_record_without_replay_fields_or_an_unknown_key_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    record = played(SPECS[:1], make_policy("solver"))[0]
    run = write_run(tmp_path / "run", [record])
    assert replay_cli(str(run), "--episode", "nope") == EXIT_CONFIG
    assert "not in" in capsys.readouterr().err
    del record["replay"]
    write_run(run, [record])
    assert replay_cli(str(run)) == EXIT_CONFIG
    assert "carries no replay fields" in capsys.readouterr().err


def one_error_line(capsys: pytest.CaptureFixture) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    return lines[0]


@pytest.mark.parametrize("missing", ["turns", "messages"])
def test_replay_cli__a_record_without_turns_or_messages_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture, missing: str
) -> None:
    record = played(SPECS[:1], make_policy("solver"))[0]
    del record[missing]
    run = write_run(tmp_path / "run", [record])
    assert replay_cli(str(run)) == EXIT_CONFIG
    assert f"has no '{missing}' list" in one_error_line(capsys)
    with pytest.raises(ConfigError, match=missing):
        replay_record(record)


def test_replay_cli__a_deeply_nested_line_is_malformed_and_skip_malformed_replays_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    (record,) = played(SPECS[:1], make_policy("solver"))
    run = write_run(tmp_path / "run", [record])
    with (run / "episodes.jsonl").open("a") as handle:
        handle.write('{"key": ' * 100_000 + "1" + "}" * 100_000 + "\n")
    assert replay_cli(str(run)) == EXIT_MALFORMED
    assert "line 2: not JSON (nested too deeply)" in one_error_line(capsys)
    assert replay_cli(str(run), "--skip-malformed") == EXIT_OK  # the flag the message suggests exists
    assert capsys.readouterr().out.strip().endswith("1 identical, 0 differ")


def with_deep_arguments(record: dict[str, Any], levels: int) -> dict[str, Any]:
    """``record`` with its first tool call's ``arguments`` an object ``levels`` deep (parseable, but
    deeper than a record may nest)."""
    deep = json.loads(json.dumps(record))
    deep["key"] += "-deep"
    call = next(message for message in deep["messages"] if message.get("tool_calls"))["tool_calls"][0]
    call["function"]["arguments"] = nested_dict(levels)
    return deep


def test_replay_cli__a_record_nested_past_the_bound_is_a_malformed_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    (record,) = played(SPECS[:1], make_policy("solver"))
    run = write_run(tmp_path / "run", [record, with_deep_arguments(record, MAX_JSON_DEPTH + 50)])
    assert replay_cli(str(run)) == EXIT_MALFORMED
    assert f"line 2: nested deeper than {MAX_JSON_DEPTH} levels" in one_error_line(capsys)
    assert replay_cli(str(run), "--skip-malformed") == EXIT_OK
    assert capsys.readouterr().out.strip().endswith("1 identical, 0 differ")


def test_replay_cli__a_key_recorded_twice_is_replayed_once_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    records = played(SPECS[:2], make_policy("solver"))
    run = write_run(tmp_path / "run", [records[0], records[1], records[0]])
    assert replay_cli(str(run)) == EXIT_OK
    captured = capsys.readouterr()
    assert captured.out.strip() == "replayed 2 episodes: 2 identical, 0 differ"
    assert "left out 1 record(s) whose key an earlier line has (lines 3)" in captured.err


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from ace_gym.agents.llm.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny"))


def test_replay_cli__replays_a_tiny_model_run_exactly(tiny_model: Path, tmp_path: Path) -> None:
    """Sampled noise (unreadable turns, corrective messages) and steered tool calls with failures."""
    from transformers import AutoTokenizer

    from ace_gym.agents.llm.hf_engine import HFChatEngine
    from tests.steering import ScriptedTurns, SteeredLlama, fill_then_done

    noise = HFChatEngine(tiny_model, max_new_tokens=10, temperature=1.0, seed=5)
    records = played([EpisodeSpec.of("course", instance_index=1, seed=2, max_turns=3)], noise)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model = SteeredLlama.from_pretrained(tiny_model)
    specs = [EpisodeSpec.of(domain, instance_index=0, seed=3, max_turns=4) for domain in ("meal", "workforce")]
    model.steering = ScriptedTurns(tokenizer, fill_then_done(specs))
    records += played(specs, HFChatEngine(model, tokenizer, max_new_tokens=64, temperature=1.0, seed=0))
    assert all(r["tokens"] is not None for r in records) and any(r["terminated"] for r in records)
    run = write_run(tmp_path / "run", records)
    assert replay_cli(str(run)) == EXIT_OK


RECORDS_BEFORE_ISSUE_28 = Path(__file__).resolve().parents[1] / "data" / "records_7123f6b"
"""Runs written at commit 7123f6b (README.md there), before issue 28 moved the benchmark wrappers,
the scenario env and the result files: their records name the old module paths."""
RUNS_BEFORE_ISSUE_28 = {
    "plain": ["--policy", "solver", "--domains", "course", "--hidden-slots", "1", "--tool-failure-rates", "0.0", "0.3"],
    "settings": [
        "--policy",
        "solver",
        "--domains",
        "course",
        "--hidden-slots",
        "1",
        "--wrappers",
        "unsolvable",
        "broken",
    ],
    "feedback": ["--policy", "greedy-revise", "--domains", "meal", "--hidden-slots", "1", "--feedback-rounds", "2"],
    "scenario": ["--policy", "solver", "--domains", "course", "--hidden-slots", "1", "--scenario", "2"],
}


@pytest.mark.parametrize("name", sorted(RUNS_BEFORE_ISSUE_28))
def test_records_written_before_the_moves__replay_identical_and_their_run_is_never_played_again(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / name
    run.mkdir()
    episodes = gzip.decompress((RECORDS_BEFORE_ISSUE_28 / f"{name}.jsonl.gz").read_bytes())
    (run / "episodes.jsonl").write_bytes(episodes)
    summary = (RECORDS_BEFORE_ISSUE_28 / f"{name}.summary.json").read_bytes()
    (run / "summary.json").write_bytes(summary)

    replayed = main(["replay", str(run)])
    if name == "settings":  # issue 38 changed UnsolvableMix on purpose (markers in solvable tasks): replay says so
        assert replayed == EXIT_REPLAY_MISMATCH
        assert "env_spec differs" in "".join(capsys.readouterr())
    else:
        assert replayed == EXIT_OK  # the recorded stack is the one rebuilt today
    resumed = main(["eval", *RUNS_BEFORE_ISSUE_28[name], "--no-progress", "--out", str(run)])
    assert (run / "episodes.jsonl").read_bytes() == episodes  # nothing played again
    # their keys are in the former format (episode keys name the stack since issue 41): the same
    # flags now make another run, refused naming the difference
    assert resumed == EXIT_CONFIG
    refused = capsys.readouterr().err
    assert "holds another run: " in refused and "episode_keys None (this eval: 'stack')" in refused
    if name in ("feedback", "scenario"):  # played for the old default reward (and feedback at the old
        # default threshold, 0.6): the same flags now ask for the verdict (and 1.0)
        assert f"holds another run: {name}" in refused
    elif name == "plain":  # its failures were drawn from the seed alone: the same flags now draw per episode
        assert "failure_draws" in refused
    assert (run / "summary.json").read_bytes() == summary


def test_a_record_that_relied_on_the_old_feedback_threshold__replays_at_the_threshold_it_was_played_at() -> None:
    (record,) = [
        json.loads(line)
        for line in gzip.decompress((RECORDS_BEFORE_ISSUE_28 / "feedback.jsonl.gz").read_bytes()).splitlines()[:1]
    ]
    assert "threshold" not in record["replay"]["spec"]["feedback_rounds"]
    rounds = dict(replay_spec(record).stack.wrappers)["feedback_rounds"]
    assert rounds == {"max_attempts": 2, "threshold": 0.6, "final_reward": "final"}
    assert replay_record(record) is None


def test_current_entry_points__name_a_moved_class_by_its_home_and_leave_other_values() -> None:
    old = {
        "entry_point": "ace_gym.envs.scenario:ScenarioEnv",
        "additional_wrappers": [
            {"name": "UnsolvableMix", "entry_point": "ace_gym.wrappers.unsolvable_mix:UnsolvableMix", "kwargs": {}},
            {"name": "X", "entry_point": "os:system", "kwargs": {}},  # never imported: not ace_gym
            "not a wrapper",
        ],
    }
    assert current_entry_points(old) == {
        "entry_point": "ace_gym.feedback.scenario:ScenarioEnv",
        "additional_wrappers": [
            {"name": "UnsolvableMix", "entry_point": "ace_gym.planning.unsolvable_mix:UnsolvableMix", "kwargs": {}},
            {"name": "X", "entry_point": "os:system", "kwargs": {}},
            "not a wrapper",
        ],
    }
    assert current_entry_points({"entry_point": "ace_gym.nowhere:Nothing"}) == {
        "entry_point": "ace_gym.nowhere:Nothing"
    }
    assert current_entry_points(None) is None


@pytest.mark.parametrize("current", sorted(OLD_ENTRY_POINTS.values()))
def test_old_entry_points__each_names_a_class_by_the_module_that_defines_it(current: str) -> None:
    found = load_env_creator(current)
    assert f"{found.__module__}:{found.__qualname__}" == current

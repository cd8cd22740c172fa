"""The settings table: one stacking order, defaults, metrics from episode records, and
``ace-gym eval --wrappers`` with the scripted policies' expected metrics in the summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from ace_gym.cli import main
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError
from ace_gym.exit_codes import EXIT_CONFIG
from ace_gym.planning import BrokenTool, ExtraneousTools, Refine, UnsolvableMix
from ace_gym.planning.settings import SETTINGS, apply_settings, check_settings, episode_apb, setting_metrics
from ace_gym.runs.results import read_records
from ace_gym.tools.readonly import ReadOnlyDict


def test_check_settings__stacking_order_whatever_the_order_given() -> None:
    assert check_settings(["refine", "broken", "extraneous", "unsolvable", "broken"]) == (
        "extraneous",
        "unsolvable",
        "broken",
        "refine",
    )
    published = ["cost", "extraneous", "unsolvable", "broken", "refine"]  # APB's, in its order; a new one may join
    assert [name for name in SETTINGS if name in published] == published
    with pytest.raises(ConfigError, match="did you mean 'broken'"):
        check_settings(["brokne"], "wrappers")


def test_apply_settings__wraps_innermost_first_with_defaults_and_options() -> None:
    env = apply_settings(AceEnv("course"), ["refine", "extraneous", "broken", "unsolvable"], {"extraneous": {"n": 2}})
    layers = []
    while env is not env.unwrapped:
        layers.append(type(env))
        env = env.env  # type: ignore[attr-defined]
    assert layers == [Refine, BrokenTool, UnsolvableMix, ExtraneousTools]


def test_episode_apb__each_setting_keeps_its_last_state_across_calls_and_turns() -> None:
    record = {
        "turns": [
            {"info": {"calls": [{"apb": {"broken_tool": {"category": 0, "failures": 1}}}]}},
            {"info": {"calls": [{"apb": {"broken_tool": {"category": 1}, "unsolvable": {"refused": True}}}]}},
            {"info": {"apb": {"unsolvable": {"kind": "missing_tool"}}}},
        ]
    }
    assert episode_apb(record) == {
        "broken_tool": {"category": 1, "failures": 1},
        "unsolvable": {"refused": True, "kind": "missing_tool"},
    }


def test_setting_metrics__broken_categories_and_refine_rates() -> None:
    def record(apb: dict[str, Any]) -> dict[str, Any]:
        return {"turns": [{"info": {"apb": apb}}]}

    broken = [record({"broken_tool": {"failures": 1, "category": c, "retries": c == 3}}) for c in (1, 2, 3, 5)]
    metrics = setting_metrics(["broken"], [*broken, record({"broken_tool": {"failures": 0, "category": 0}})])["broken"]
    assert metrics["failed_episodes"] == 0.8 and metrics["correct"] == 0.5 and metrics["category_3"] == 0.25
    refine = record({"refine": {"proposals": 4, "correct_before": 2, "correct_after": 3, "improved": 2, "degraded": 1}})
    assert setting_metrics(["refine"], [refine])["refine"] == {
        "episodes": 1.0,
        "proposals": 4.0,
        "correct_before": 0.5,
        "correct_after": 0.75,
        "improvement_rate": 1.0,
        "degradation_rate": 0.5,
    }


def _eval(out: Path, *args: str) -> int:
    return main(["eval", "--no-progress", "--domains", "course", "--hidden-slots", "5", "--out", str(out), *args])


def test_eval__wrappers_put_each_settings_metrics_in_the_summary(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert _eval(tmp_path / "refuse", "--policy", "refuse", "--wrappers", "unsolvable,broken") == 0
    summary = json.loads((tmp_path / "refuse" / "summary.json").read_text())
    unsolvable = summary["settings"]["unsolvable"]
    assert unsolvable["refusal_recall"] == 1.0 and unsolvable["false_refusal_rate"] == 1.0
    assert 0 < unsolvable["unsolvable_share"] < 1
    assert "planning settings:" in capsys.readouterr().out
    assert summary["run"]["settings"]["wrappers"] == ["unsolvable", "broken"]
    records = read_records(tmp_path / "refuse" / "episodes.jsonl")
    assert all(
        r["settings"] == ["unsolvable", "broken"]
        and '"name": "unsolvable"' in r["key"]
        and '"name": "broken"' in r["key"]
        for r in records
    )

    assert _eval(tmp_path / "replace", "--policy", "probe-replace", "--wrappers", "broken") == 0
    broken = json.loads((tmp_path / "replace" / "summary.json").read_text())["settings"]["broken"]
    assert broken["category_1"] == 1.0 and broken["correct"] == 1.0 and broken["recovered"] == 1.0


def test_eval__unknown_wrapper_is_a_config_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert _eval(tmp_path, "--policy", "solver", "--wrappers", "extranous") == EXIT_CONFIG
    assert "did you mean" in capsys.readouterr().err


def test_every_setting__records_its_arguments_so_the_spec_rebuilds_the_stack() -> None:
    options = {
        "cost": {"lam": 0.5, "composites": False, "reference": False},
        "extraneous": {"n": 3, "style": "unrelated", "behaviour": "error", "penalty": 0.1},
        "unsolvable": {"p_unsolvable": 0.25, "kinds": ["missing_tool"], "rewards": {"refuse_solvable": -1.0}},
        "broken": {"target": "global_check", "hint": True},
        "refine": {"critic": "none", "mode": "generic"},
    }
    env = apply_settings(gym.make("ACE-travel-v0"), SETTINGS, options)
    rebuilt = gym.make(env.spec)
    assert rebuilt.spec == env.spec
    assert [w.kwargs for w in rebuilt.spec.additional_wrappers][-5:] == [
        {"costs": None, **options["cost"], "reward": "penalty"},
        options["extraneous"],
        {**options["unsolvable"], "marker_rate": 0.5},
        options["broken"],
        options["refine"],
    ]
    first, again = env.reset(seed=4), rebuilt.reset(seed=4)
    assert first[0] == again[0] and first[1]["apb"] == again[1]["apb"]


def test_every_setting__offers_read_only_schemas_and_leaves_the_shared_ones_alone() -> None:
    env = apply_settings(
        AceEnv("meal"), list(SETTINGS), {"cost": {"reference": False}, "unsolvable": {"p_unsolvable": 1.0}}
    )
    shared = [json.dumps(s) for s in AceEnv("meal").reset(seed=0)[1]["tools"]]
    for seed in range(4):
        tools = env.reset(seed=seed)[1]["tools"]
        assert all(isinstance(s, ReadOnlyDict) for s in tools)
        assert all(s["function"]["description"].count("Cost:") <= 1 for s in tools)
    assert [json.dumps(s) for s in AceEnv("meal").reset(seed=0)[1]["tools"]] == shared

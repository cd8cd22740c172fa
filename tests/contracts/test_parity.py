"""Replaying the recorded reference traces gives the identical observation for every call."""

from __future__ import annotations

import json

import pytest

from ace_gym.envs import AceEnv
from tests.conftest import DATA, load_traces, replay_trace, trace_env

TRACES = load_traces()


@pytest.mark.parametrize("trace", TRACES, ids=[f"{t['variant']}-{t['instance_id']}" for t in TRACES])
def test_replay__matches_reference_observations_and_score(trace: dict) -> None:
    replay_trace(trace_env(trace), trace)


@pytest.mark.parametrize("variant", ["cli_defaults", "finite_budgets"])
def test_prompt__matches_reference_rendering(variant: str) -> None:
    sample = json.loads((DATA / "prompt_and_tool_schemas_sample.json").read_text())["variants"][variant]
    kwargs = sample["task_kwargs"]
    env = AceEnv(
        "course",
        extra_query_num=kwargs["extra_query_num"],
        global_check_alpha=kwargs["global_check_alpha"],
        max_query_ids=kwargs["max_query_ids"],
        max_query_fields=kwargs["max_query_fields"],
    )
    observation, info = env.reset(options={"instance_id": "course_r5_c5_h5_b4"})
    system, user = sample["messages"]
    assert info["system_prompt"] == system["content"]
    assert observation == user["content"]
    assert sorted(t["function"]["name"] for t in info["tools"]) == sorted(
        t["function"]["name"] for t in sample["tools"]
    )


# the published release's budget sentence per (queries limited, global checks limited), recorded from its prompt code
BUDGET_SENTENCES = {
    (False, False): "Attribute queries per hidden slot and global check have no call-count limits in this task.",
    (True, False): "Attribute queries per hidden slot have a limited call count\u2014plan your usage carefully; "
    "global check has no call-count limit.",
    (False, True): "Attribute queries per hidden slot have no call-count limit; global check has a limited call "
    "count\u2014plan your usage carefully.",
    (True, True): "Both attribute queries (per hidden slot) and global check have limited call counts\u2014plan "
    "your usage carefully.",
}


@pytest.mark.parametrize(("queries_limited", "checks_limited"), list(BUDGET_SENTENCES))
@pytest.mark.parametrize("alpha", [0, 1])
def test_prompt__budget_sentences_are_the_releases(queries_limited: bool, checks_limited: bool, alpha: int) -> None:
    env = AceEnv(
        "meal", extra_query_num=0 if queries_limited else -1, global_check_alpha=alpha if checks_limited else -1
    )
    system = env.reset(options={"instance_index": 9})[1]["system_prompt"]
    instructions = system.split("<instructions>\n")[1].split("\n</instructions>")[0].splitlines()
    assert instructions[4] == BUDGET_SENTENCES[queries_limited, checks_limited]
    disabled = "`check_meal_global_constraints` is disabled in this task, so do not call it."
    assert (disabled in system) == (checks_limited and alpha == 0)

"""Greedy-local and random baselines, and the scripted-episode contract."""

from __future__ import annotations

import itertools

import pytest

from ace_gym.agents import DONE, GreedyLocal, RandomPolicy, ScriptedEpisode, ScriptedPolicy
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.envs import AceEnv
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.tools import tool_names

BUNDLED_INSTANCES = 35


def test_greedy__mean_score_is_non_increasing_in_decoy_budget() -> None:
    specs = [EpisodeSpec.of(d, instance_index=i) for d in DOMAIN_NAMES for i in range(BUNDLED_INSTANCES)]
    by_budget: dict[int, list[int]] = {}
    for record in run_episodes(specs, GreedyLocal()):
        by_budget.setdefault(record["decoy_budget"], []).append(record["score"])
    budgets = sorted(by_budget)
    means = [sum(by_budget[b]) / len(by_budget[b]) for b in budgets]
    print("\ndecoy budget B | " + " | ".join(f"{b:>5}" for b in budgets))
    print("greedy score   | " + " | ".join(f"{m:5.3f}" for m in means))
    assert means[0] == 1.0  # without decoys every slot-valid candidate is the truth
    assert all(later <= earlier for earlier, later in itertools.pairwise(means))
    assert means[-1] < means[0]


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_greedy__never_reasons_globally(domain: str) -> None:
    records = list(run_episodes([EpisodeSpec.of(domain, instance_index=i) for i in range(0, 35, 5)], GreedyLocal()))
    for record in records:
        called = {m["name"] for m in record["messages"] if m["role"] == "tool"}
        names = tool_names(domain)
        assert names["global_check"] not in called
        assert called <= {names["query"], names["set_slot"], names["done"]}


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_random__never_crashes_and_ends_every_episode(domain: str) -> None:
    specs = [EpisodeSpec.of(domain, instance_index=i, seed=s, max_turns=200) for i in range(0, 35, 4) for s in range(3)]
    records = list(run_episodes(specs, RandomPolicy(), batch_size=8))
    assert len(records) == len(specs)
    assert all(r["terminated"] or r["truncated"] for r in records)
    offered = {s["function"]["name"] for s in records[0]["tools"]}
    assert {m["name"] for r in records for m in r["messages"] if m["role"] == "tool"} <= offered


def test_random__same_seed_same_calls_other_seed_other_calls() -> None:
    def calls(seed: int, trial: int) -> list:
        (record,) = run_episodes([EpisodeSpec.of("travel", instance_index=20, seed=seed, trial=trial)], RandomPolicy())
        return [m["tool_calls"] for m in record["messages"] if m["role"] == "assistant"]

    assert calls(3, 0) == calls(3, 0)
    assert calls(3, 0) != calls(3, 1)


def test_scripted_episode__returns_done_once_the_script_ends() -> None:
    def script():
        response = yield {"name": "get_current_grid_state", "arguments": {}}
        assert response == "first reply"

    episode = ScriptedEpisode(script(), {})
    assert episode.act("ignored reset observation")["name"] == "get_current_grid_state"
    assert episode.act("first reply") == DONE
    assert episode.act("anything") == DONE


def test_scripted_policy__reports_unreadable_prompt_in_notes_instead_of_raising() -> None:
    env = AceEnv("course")
    observation, info = env.reset(seed=0, options={"instance_index": 3})
    broken = {**info, "system_prompt": "no rules here"}
    for policy in (GreedyLocal(), RandomPolicy()):
        assert isinstance(policy, ScriptedPolicy)
        episode = policy.start(observation, broken, seed=0)
        assert episode.act(observation) == DONE
        assert "error" in episode.notes

"""The exact solver: 100 % on bundled and generated data with unlimited budgets, honest notes
with finite ones, step count linear in hidden slots, and tools-only play."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from ace_gym.agents import BatchingSolver, ExactSolver
from ace_gym.agents.solver import search
from ace_gym.agents.task_view import SlotView, TaskView
from ace_gym.domains import DOMAIN_NAMES, NumericAttribute, get_domain
from ace_gym.envs import AceEnv
from ace_gym.eval import EpisodeSpec, run_episodes

BUNDLED_INSTANCES = 35


def play(env: AceEnv, index: int) -> tuple[dict, dict, list[dict]]:
    """Run the solver on instance ``index``; (reset info, last step info, actions)."""
    observation, info = env.reset(seed=0, options={"instance_index": index})
    episode = ExactSolver().start(observation, info, seed=0)
    actions, last = [], {}
    while True:
        action = episode.act(observation)
        actions.append(action)
        observation, _, terminated, truncated, last = env.step(action)
        if terminated or truncated:
            return info, {**last, "notes": episode.notes}, actions


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_solver__solves_every_bundled_instance(domain: str) -> None:
    env = AceEnv(domain)
    failures = []
    for index in range(BUNDLED_INSTANCES):
        _, last, _ = play(env, index)
        if not last["score"]:
            failures.append((index, last["reason"], last["notes"]))
    assert failures == []


@pytest.mark.slow
@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_solver__solves_every_instance_of_the_bundled_5x7_benchmark(domain: str) -> None:
    count = len(AceEnv(domain, "5x7").dataset)
    records = list(run_episodes([EpisodeSpec.of(domain, "5x7", instance_index=i) for i in range(count)], ExactSolver()))
    assert count == 54 and [r["score"] for r in records] == [1] * count


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_solver__only_calls_the_tools_it_was_given(domain: str) -> None:
    env = AceEnv(domain)
    info, last, actions = play(env, 30)
    offered = {schema["function"]["name"] for schema in info["tools"]}
    assert {a["name"] for a in actions} <= offered
    assert actions[-1]["name"] == "done" and last["score"]


def _naive_ok(domain_rules: list, grid: list[list[dict]]) -> bool:
    """Plain-Python semantics of complete-grid global rules (docs/compatibility.md §1.6), for cross-checking."""
    items = [item for row in grid for item in row]
    for rule, bound in domain_rules:
        values = [item[rule.attribute] for item in items]
        if rule.kind == "sum_max" and not sum(values) <= bound:
            return False
        if rule.kind == "sum_min" and not sum(values) >= bound:
            return False
        if rule.kind == "repeat_max" and not max(values.count(v) for v in values) <= bound:
            return False
        if rule.kind == "count_min" and not sum(v == rule.value for v in values) >= bound:
            return False
        if rule.kind == "count_min_threshold" and not sum(v >= rule.threshold for v in values) >= bound:
            return False
        if rule.kind == "max_row_sum" and not max(sum(i[rule.attribute] for i in row) for row in grid) <= bound:
            return False
    return True


@pytest.mark.parametrize("domain_name", DOMAIN_NAMES)
def test_search__yields_exactly_the_brute_force_solutions_on_random_small_grids(domain_name: str) -> None:
    domain = get_domain(domain_name)
    rng = np.random.default_rng(5)
    partial = 0  # grids where rules cut some completions but not all: the interesting case
    for _ in range(40):
        rows, cols = 2, 3
        hidden = sorted(rng.choice(rows * cols, size=4, replace=False).tolist())

        def random_item() -> dict:
            return {
                a.name: int(rng.integers(a.low, a.high + 1))
                if isinstance(a, NumericAttribute)
                else str(rng.choice(a.values))
                for a in domain.attributes
            }

        grid: list[list[str | None]] = [[None] * cols for _ in range(rows)]
        visible = {}
        for cell in range(rows * cols):
            if cell not in hidden:
                name = f"V{cell}"
                grid[cell // cols][cell % cols] = name
                visible[name] = random_item()
        slots = tuple(SlotView(cell // cols, cell % cols, ()) for cell in hidden)
        candidates = [{f"S{s}_{k}": random_item() for k in range(3)} for s in range(len(slots))]
        view = TaskView(domain, grid, {}, slots, None, 5, 5)
        # bounds drawn around the aggregates of one random completion, so some rules bind
        rules = []
        for rule in domain.global_rules:
            bound = {"sum_max": 1, "sum_min": 1, "max_row_sum": 1}.get(rule.kind, 0)
            sample = [
                [visible.get(grid[r][c]) or candidates[0][next(iter(candidates[0]))] for c in range(cols)]
                for r in range(rows)
            ]
            flat = [i[rule.attribute] for row in sample for i in row]
            if rule.kind in ("sum_max", "sum_min"):
                bound = sum(flat) + int(rng.integers(-3, 4)) * (1 if rule.kind == "sum_max" else -1)
            elif rule.kind == "max_row_sum":
                bound = max(sum(i[rule.attribute] for i in row) for row in sample) + int(rng.integers(-2, 3))
            elif rule.kind == "repeat_max":
                bound = int(rng.integers(2, 5))
            else:
                bound = int(rng.integers(0, 4))
            rules.append((rule, bound))
        found = set(search(view, visible, candidates, rules))
        expected = set()
        for choice in itertools.product(*(list(c) for c in candidates)):
            full = [[visible[grid[r][c]] if grid[r][c] else None for c in range(cols)] for r in range(rows)]
            for slot, item, options in zip(slots, choice, candidates, strict=True):
                full[slot.row][slot.col] = options[item]
            if _naive_ok(rules, full):
                expected.add(choice)
        assert found == expected
        partial += 0 < len(expected) < 3**4
    assert partial >= 5


@pytest.mark.parametrize(
    "budgets", [{"extra_query_num": 0, "global_check_alpha": 1}, {"extra_query_num": 0, "global_check_alpha": 0}]
)
def test_solver__finite_budgets__never_crashes_and_explains_every_failure(budgets: dict) -> None:
    specs = [
        EpisodeSpec.of(d, instance_index=i, env_kwargs=budgets) for d in DOMAIN_NAMES for i in range(BUNDLED_INSTANCES)
    ]
    records = list(run_episodes(specs, ExactSolver()))
    assert len(records) == len(specs)
    failed = [r for r in records if not r["score"]]
    for record in failed:
        assert record["notes"].get("missing_queries") or record["notes"].get("exhausted"), record["notes"]
        assert record["notes"].get("verified") is not True
    solved = sum(r["score"] for r in records)
    print(f"\nsolver with {budgets}: {solved}/{len(records)} solved; {len(failed)} failures, each explained in notes")
    assert solved > len(records) // 2


def test_solver__steps_grow_about_linearly_with_hidden_slots() -> None:
    specs = [EpisodeSpec.of(d, instance_index=i) for d in DOMAIN_NAMES for i in range(BUNDLED_INSTANCES)]
    steps: dict[int, list[int]] = {}
    for record in run_episodes(specs, ExactSolver()):
        steps.setdefault(record["hidden_slots"], []).append(record["usage"]["turns"])
    hidden = np.array(sorted(steps), dtype=float)
    mean = np.array([np.mean(steps[h]) for h in sorted(steps)])
    slope, intercept = np.polyfit(hidden, mean, 1)
    residual = mean - (slope * hidden + intercept)
    r_squared = 1 - (residual**2).sum() / ((mean - mean.mean()) ** 2).sum()
    print(
        "\nhidden slots -> mean solver steps: "
        + ", ".join(f"{int(h)}: {m:.1f}" for h, m in zip(hidden, mean, strict=True))
    )
    print(f"linear fit: {slope:.2f} steps per hidden slot + {intercept:.1f}, R^2 = {r_squared:.4f}")
    assert slope > 0 and r_squared > 0.98


@pytest.mark.slow
@pytest.mark.parametrize("domain", DOMAIN_NAMES)
@pytest.mark.parametrize(
    ("rows", "cols", "hidden", "budgets"), [(5, 7, [5, 21], [4, 25]), (10, 10, [30], [0, 40])], ids=["5x7", "10x10"]
)
def test_solver__solves_generated_datasets(
    tmp_path: Path, domain: str, rows: int, cols: int, hidden: list[int], budgets: list[int]
) -> None:
    from ace_gym.generators import generate_dataset

    path = tmp_path / f"{domain}.json"
    generate_dataset(domain, rows=rows, cols=cols, hidden_slots=hidden, decoy_budgets=budgets, seed=11, path=path)
    count = len(json.loads(path.read_text())["instances"])
    records = list(
        run_episodes([EpisodeSpec.of(domain, str(path), instance_index=i) for i in range(count)], ExactSolver())
    )
    assert [r["score"] for r in records] == [1] * count, [r["notes"] for r in records if not r["score"]]


def _calls(record: dict) -> list[tuple[str, str]]:
    """The tool calls of a record, in order, whatever turns they were made in."""
    return [
        (call["function"]["name"], call["function"]["arguments"])
        for message in record["messages"]
        for call in message.get("tool_calls", ())
    ]


@pytest.mark.parametrize("observation", ["full", "compact"])
def test_batching_solver__solves_every_domain_in_four_turns_with_the_solvers_own_calls(observation: str) -> None:
    specs = [
        EpisodeSpec.of(domain, instance_index=index, env_kwargs={"observation": observation})
        for domain in DOMAIN_NAMES
        for index in (0, 12, 20, 27, 34)  # H = 1, 5, 7, 11, 15 (budgets vary too)
    ]
    one_by_one = {r["key"].split("|", 1)[1]: r for r in run_episodes(specs, ExactSolver())}
    batched = {r["key"].split("|", 1)[1]: r for r in run_episodes(specs, BatchingSolver())}
    assert {r["hidden_slots"] for r in batched.values()} == {1, 5, 7, 11, 15}
    for key, record in batched.items():
        assert (record["score"], one_by_one[key]["score"]) == (1.0, 1.0), key
        assert record["usage"]["turns"] <= 4 < one_by_one[key]["usage"]["turns"], key
        assert sorted(_calls(record)) == sorted(_calls(one_by_one[key])), key
        assert record["usage"]["tool_calls"] == len(_calls(record))


def test_batching_solver__retries_injected_failures_in_a_later_turn() -> None:
    spec = EpisodeSpec.of("course", instance_index=34, tool_failure_rate=0.3)
    (record,) = run_episodes([spec], BatchingSolver())
    assert record["score"] == 1.0 and record["failures"]
    assert 4 < record["usage"]["turns"] < 20

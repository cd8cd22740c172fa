"""No policy without planning wins a reward (issue 38).

The bank of ``benchmarks/reward_tells.py`` (policies that act only on what a model sees: names and
their order, candidate order, tool lists, prompt phrases, answer priors learnt on other seeds, the
trajectory's shape, check-guided random search) is played on every registered env id, default and
under FIT, and each policy held to its floor (:func:`reward_tells.floor`): under FIT no no-planning
policy earns more than greedy-local + 0.1 on a training id, none more than chance + 0.1 on the
probes and QA envs, no tell reader more than the honest solver + 0.1, blanket refusal less than
the honest solver, and a grid filled without planning at most 0.3 on AgencyBench's rounds. The
default settings keep the documented exceptions of :data:`reward_tells.DEFAULT_EXCEPTIONS`
(release parity). The full table, with more seeds, is ``docs/rewards.md``
(``benchmarks/bench_rewards.py``).

Ids come from the registry, so a new id is covered without anyone remembering to. With few seeds
per id, the sweep counts a policy above its floor only by more than two standard errors
(:func:`reward_tells.above_floor`); each numbered finding of the issue has its own test below, held
the same way with more seeds on the ids where it was found.
"""

from __future__ import annotations

import functools
import re
from collections import Counter

import gymnasium as gym
import pytest

from ace_gym.planning.probes import CarefulNeverRefuse
from tests.benchmark_scripts import load_benchmark

rt = load_benchmark("reward_tells")

SWEEP_SEEDS: dict[str, int] = {"ACE-<domain>-procedural-10x10-v0": 2, "ACE-<domain>-procedural-v0": 4}
"""Evaluation seeds per family in the sweep (default :data:`SWEEP_DEFAULT_SEEDS`): 10x10 and 5x7 episodes are long."""
SWEEP_DEFAULT_SEEDS = 6
SWEEP_TRAIN_SEEDS = tuple(range(1000, 1030))
CELLS = rt.cells(rt.ace_env_ids())
ITEM_ID = re.compile(r"\b[A-Za-z]+\d+\b")
"""An ACE item id as texts write it (``C6568``, ``PC034``)."""


def test_the_sweep_covers_every_kind_of_env() -> None:
    # so that the parametrised test below cannot pass by covering nothing
    kinds = {(cell.kind, cell.fit) for cell in CELLS}
    assert {("tool-call", False), ("tool-call", True), ("holistic", False), ("stepwise", False)} <= kinds
    assert {("qa", False), ("puzzle", False)} <= kinds
    ids = {cell.env_id for cell in CELLS}
    assert {"ACE-course-unsolvable-v0", "ACE-Scenario-v0", "ACE-course-procedural-v0", "ACE-course-v0"} <= ids


def _sweep(cell: rt.Cell) -> list[str]:
    seeds = range(SWEEP_SEEDS.get(cell.family, SWEEP_DEFAULT_SEEDS))
    solver = "unsolvable" in cell.env_id
    means = rt.measure(cell, seeds, SWEEP_TRAIN_SEEDS, solver=solver, policies=rt.NO_PLANNING)
    return rt.above_floor(cell, means, n=len(seeds))


@pytest.mark.parametrize("cell", CELLS, ids=lambda cell: f"{cell.env_id}-{'fit' if cell.fit else 'default'}")
def test_every_registered_id__no_no_planning_policy_beats_its_floor(cell: rt.Cell) -> None:
    found = _sweep(cell)
    assert not found, "\n".join(found)


def _means(
    cell: rt.Cell, seeds: range, policies: tuple[str, ...], train: range = range(1000, 1060)
) -> dict[str, float]:
    return rt.measure(cell, seeds, train, solver="solver" in policies, policies=policies)


# -- finding 1: the published 5x5 data's name order -------------------------------------------

PUBLISHED_DATA_STACKS = (
    rt.Cell("ACE-course-v0", fit=True),
    rt.Cell("ACE-travel-distractors-v0", fit=True),
    rt.Cell("ACE-pc_build-scenario-v0", fit=True),
    rt.Cell("ACE-shopping-v0", fit=True, wrappers=("feedback_rounds",)),
)
"""Stacks that train on the published 5x5 data at 1944dd5, one per kind, spread over domains. On the
scenario and FeedbackRounds stacks greedy-local earned 0.94-0.98 at 1944dd5 (finding 7), so the
name tell shows there only once their reward needs planning; on the broken-tool ids no scripted
policy earns anything (none switches to the replacement tool: docs/rewards.md)."""


@pytest.mark.parametrize("cell", PUBLISHED_DATA_STACKS, ids=lambda cell: cell.family)
def test_finding_1__under_fit_the_smallest_name_number_is_no_better_than_greedy(cell: rt.Cell) -> None:
    """At 1944dd5 the truth of every published 5x5 instance is its cell's candidate with the
    smallest name number: that policy earned 1.0 under FIT on every stack that trains on them."""
    policies = ("smallest-name", "any-smallest-name")
    assert rt.above_floor(cell, _means(cell, range(8), policies), n=8, only=policies) == []


def test_finding_1__the_published_data_keeps_its_tell_by_default() -> None:
    """The default stays the release (parity): the tell is documented, not removed (docs/compatibility.md)."""
    means = _means(rt.Cell("ACE-course-v0"), range(4), ("smallest-name", "any-smallest-name"))
    assert means["smallest-name"] == means["any-smallest-name"] == 1.0


# -- finding 2: unlimited global checks --------------------------------------------------------


def test_finding_2__under_fit_check_guided_random_search_is_no_better_than_greedy_on_the_published_data() -> None:
    """A random slot-valid grid re-drawn one slot per failed global check paid 0.82 on the 5x5 data
    at 1944dd5 (greedy-local 0.28): FIT left the global check unlimited. Pooled over the six
    domains, 40 seeds each (a 5x5 episode takes milliseconds)."""
    cells = [rt.Cell(f"ACE-{domain}-v0", fit=True) for domain in rt.ace_gym.DOMAIN_NAMES]
    found = [_means(cell, range(40), ("check-search",)) for cell in cells]
    pooled = {policy: rt.mean(means[policy] for means in found) for policy in ("check-search", "greedy")}
    assert rt.above_floor(cells[0], pooled, n=40 * len(cells), only=["check-search"]) == []


def test_finding_2__under_fit_check_guided_random_search_is_no_better_than_greedy_on_generated_data() -> None:
    """The same search paid 0.47 on the 5x7 procedural ids at 1944dd5 (greedy-local 0.13); pooled
    over the six domains, ten seeds each."""
    cells = [rt.Cell(f"ACE-{domain}-procedural-v0", fit=True) for domain in rt.ace_gym.DOMAIN_NAMES]
    found = [_means(cell, range(10), ("check-search",)) for cell in cells]
    pooled = {policy: rt.mean(means[policy] for means in found) for policy in ("check-search", "greedy")}
    assert rt.above_floor(cells[0], pooled, n=10 * len(cells), only=["check-search"]) == []


# -- finding 3: unsolvable kinds told by the prompt's surface ----------------------------------


@pytest.mark.parametrize("fit", [False, True], ids=["default", "fit"])
def test_finding_3__no_prompt_tell_decides_unsolvable_and_blanket_refusal_loses(fit: bool) -> None:
    """Tells learnt on other seeds (tool names, absent tools, prompt trigrams) caught every
    unsolvable episode at 1944dd5: tell + solver earned 0.825-0.95 against the honest solver's
    0.375-0.575, and always refusing with the best code beat the solver in travel. Pooled over
    travel and workforce, 20 seeds each."""
    cells = [rt.Cell(f"ACE-{domain}-unsolvable-v0", fit=fit) for domain in ("travel", "workforce")]
    policies = ("visible-tell+solver", "refuse-best", "solver")
    found = [_means(cell, range(20), policies, train=range(1000, 1040)) for cell in cells]
    pooled = {policy: rt.mean(means[policy] for means in found) for policy in policies}
    assert rt.above_floor(cells[0], pooled, n=20 * len(cells), only=["visible-tell+solver", "refuse-best"]) == []


def test_finding_3__refusing_on_evidence_without_checking_earns_at_most_the_honest_solver() -> None:
    """The approval kinds' evidence (the policy stated without its tool, or the tool answering
    Outage) showed in unsolvable tasks only: refusing on it, the honest never-refusing solver
    elsewhere, earned 0.775 against the solver's 0.550 at ae39b2b (0.467 since). The policy now
    covers only items above a threshold, and the evidence shows in solvable tasks as often, where
    the truth needs no approval. A missing piece refused too, the grid filled by greedy-local:
    0.483 then, 0.417 now (course alone 0.600 then, 0.500 now, vs 0.350). Pooled over the six
    domains, seeds 0-19."""
    cells = [rt.Cell(f"ACE-{domain}-unsolvable-v0") for domain in rt.ace_gym.DOMAIN_NAMES]
    policies = ("approval-evidence+solver", "evidence-refuse+greedy", "solver")
    found = [_means(cell, range(20), policies, train=range(1000, 1010)) for cell in cells]
    pooled = {policy: rt.mean(means[policy] for means in found) for policy in policies}
    assert rt.above_floor(cells[0], pooled, n=20 * len(cells), only=policies[:2]) == []


def test_finding_3__refusing_a_missing_piece_without_counting_earns_at_most_the_honest_solver_per_domain() -> None:
    """The evidence refused without counting, the grid filled by greedy-local, in the domains
    where it stayed above the honest never-refusing solver + 0.1 on seeds 0-19 after the approval
    fix (course 0.500 vs 0.350, travel 0.600 vs 0.400: the unsolvable draws of those seeds, 12 of
    20 in travel, every one showing evidence). Held per domain over seeds 0-99."""
    for domain in ("course", "travel"):
        env = gym.make(f"ACE-{domain}-unsolvable-v0")
        seeds = range(100)
        evidence = rt.mean(rt.play(env, rt.EvidenceGreedy(), seed) for seed in seeds)
        honest = rt.mean(rt.play(env, CarefulNeverRefuse(), seed) for seed in seeds)
        assert evidence <= honest + 0.1, (domain, evidence, honest)


# -- findings 4 and 5: planning probes graded by shape -----------------------------------------


def test_finding_4__an_instance_agnostic_holistic_plan_earns_at_most_chance() -> None:
    """One template plan (per slot its rule queries and ``set_slot`` "the id chosen from step
    k"; a check; ``done``) earned 1.0 on 40/40 at 1944dd5."""
    cell = rt.Cell("ACE-Holistic-v0")
    assert rt.above_floor(cell, rt.measure(cell, range(10), ()), n=10) == []


def test_finding_5__a_trajectory_blind_step_guess_earns_at_most_chance() -> None:
    """ "A query on the first hidden slot", predicted without reading the trajectory, earned
    0.51-0.64 at 1944dd5."""
    cell = rt.Cell("ACE-StepWise-v0")
    assert rt.above_floor(cell, rt.measure(cell, range(20), ()), n=20) == []


STEPWISE_SHAPE_POLICIES = (
    "stepwise-next-cell",
    "stepwise-repeat-last",
    "stepwise-next-in-order",
    "stepwise-repeat-last-set",
    "stepwise-learnt-next",
)


def _above_chance(rewards_by_policy: dict[str, list[float]]) -> dict[str, float]:
    """The policies whose mean reward is above chance (0) by more than the margin and two
    standard errors of their own rewards (the probes' rewards are signed: a wrong guess costs)."""
    above = {}
    for name, rewards in rewards_by_policy.items():
        value = rt.mean(rewards)
        error = (rt.mean((reward - value) ** 2 for reward in rewards) / len(rewards)) ** 0.5
        if value > max(rt.MARGIN, 2 * error):
            above[name] = round(value, 3)
    return above


def test_finding_5__a_next_call_read_from_the_trajectorys_shape_earns_at_most_chance() -> None:
    """The solver's trajectory is a sweep (rule queries cell by cell, listings, id batches, sets in
    order): at APB's cut, "a query on the next cell not queried yet" earned 0.167, "the call after
    the last one in order" and the most common next call given the last (learnt on training seeds)
    0.233 on seeds 0-29 at 725c7af. The cut now lands on a decision (a set whose cell's own rules
    leave three or more candidates), and a guess of its id is held at chance exactly by
    ``tests/planning/test_stepwise.py``."""
    cell = rt.Cell("ACE-StepWise-v0")
    env = cell.make()
    guesses = rt.stepwise_guesses(cell, range(1000, 1020), STEPWISE_SHAPE_POLICIES)
    assert set(guesses) == set(STEPWISE_SHAPE_POLICIES)
    assert (
        _above_chance({name: [rt.play_text(env, guess, seed) for seed in range(30)] for name, guess in guesses.items()})
        == {}
    )


def test_finding_4__the_template_carried_out_without_planning_earns_at_most_chance() -> None:
    """Carried out (``act_after_plan``, the default since the first fix), the template plan earned
    the task's reward: 1.0 with the published names' tell (smallest name number), 0.75 with
    check-guided random search (unlimited checks), 0.35 with a random slot-valid grid and 0.2 with
    greedy-local on seeds 0-19 at 725c7af. Names are renumbered, the acting task has no global
    check, and the executed reward counts only what a random slot-valid grid would not earn."""
    cell = rt.Cell("ACE-Holistic-v0")
    env = cell.make()
    rewards = {
        name: [rt.play_holistic(env, rt.actor(name)(), seed) for seed in range(40)] for name in rt.HOLISTIC_ACTORS
    }
    assert _above_chance(rewards) == {}
    solver = [rt.play_holistic(env, rt.reference("solver"), seed) for seed in range(5)]
    assert solver == [1.0] * 5  # planning still earns everything


# -- finding 6: ALB-QA answer priors -----------------------------------------------------------

QA_CELLS = (
    rt.Cell("ALB-QA-v0", env_kwargs=rt.CELL_KWARGS["ALB-QA-v0"]),
    rt.Cell("ALB-QA-v0", env_kwargs=rt.QA_VERBOSE),
)
QA_SEEDS = {"ALB-QA-v0": (range(60), range(1000, 1060)), "ALB-QA-v0 (fmt=verbose)": (range(30), range(1000, 1030))}
"""Evaluation and training seeds per QA cell (a verbose 32k history takes a few tenths of a second)."""
QA_TYPE_CEILING = 0.25
"""The most a surface policy may earn on any one question type (issue 38)."""


def _held(rewards: list[float], ceiling: float) -> bool:
    return rt.mean(rewards) <= ceiling + 2 * rt.standard_error(rt.mean(rewards), len(rewards))


@pytest.mark.parametrize("cell", QA_CELLS, ids=lambda cell: cell.family)
def test_finding_6__no_alb_qa_surface_policy_earns_more_than_chance(cell: rt.Cell) -> None:
    """Each question template's most frequent gold answer (learnt on other seeds) earned 0.175
    concise and 0.363 verbose at 1944dd5 (verbose Count Frequency (Env) 0.875 for "1"; 0.386
    verbose at 725c7af, Count Correctness 0.54 for "0"), and the most frequent name answered concise
    Intersections. Held, for the answer prior, the most frequent name and every
    ``SURFACE_ANSWERS`` policy: at most 0.1 overall and 0.25 on every question type (a balanced
    question asks no yes/no), each within two standard errors."""
    seeds, train = QA_SEEDS[cell.family]
    found = rt.qa_rewards(cell, seeds, train)
    above = []
    for policy, by_type in found.items():
        everything = [reward for rewards in by_type.values() for reward in rewards]
        if not _held(everything, rt.MARGIN):
            above.append(f"{policy}: {rt.mean(everything):.3f} overall")
        above += [
            f"{policy}: {rt.mean(rewards):.3f} on {kind} (n={len(rewards)})"
            for kind, rewards in by_type.items()
            if not _held(rewards, QA_TYPE_CEILING)
        ]
    assert above == []


def test_finding_6__no_surface_name_earns_more_than_a_quarter_on_concise_intersection() -> None:
    """At 725c7af the target of a concise Intersection was the most frequent name of the whole
    context in 15 of 23 samples (0.65) and the first unguessed name of the last tool result in
    about half: the question asked about the last game, ranked its target among tool results only,
    and the last two attempts played the paper's long games."""
    found = _intersections(range(100))
    names = ("most-frequent-name", "last-result-name", "first-name", "last-name")
    assert len(found["most-frequent-name"]) >= 30
    assert all(_held(found[name], QA_TYPE_CEILING) for name in names), {n: rt.mean(found[n]) for n in names}


@functools.cache
def _intersections(seeds: range) -> dict[str, list[float]]:
    """Each QA policy's rewards on concise Intersection (Find Target Offsets stands in where a
    seed's budget fits no Intersection)."""
    kwargs = (*rt.CELL_KWARGS["ALB-QA-v0"], ("question_types", "intersection,find_target_offsets_tool"))
    found = rt.qa_rewards(rt.Cell("ALB-QA-v0", env_kwargs=kwargs), seeds, range(1000, 1005))
    return {policy: by_type["Intersection"] for policy, by_type in found.items()}


def test_finding_6__the_most_frequent_result_name_earns_at_most_a_quarter_on_concise_intersection() -> None:
    """At 725c7af the name listed most often in the tool results (guesses not counted) was the
    target of 0.76 of concise Intersections at 4096 tokens (seeds 0-199): a game's target is listed
    in every result of its game, and most samples of a 2-3 game history took the fallback to any
    unsolved game. The target now sits at an aimed position of the listing order."""
    rewards = _intersections(range(100))["most-frequent-result-name"]
    assert len(rewards) >= 30
    assert _held(rewards, QA_TYPE_CEILING), rt.mean(rewards)


def test_finding_6__no_nth_most_frequent_name_answers_more_than_a_quarter_of_concise_intersections() -> None:
    """Whatever position N a policy learns, the Nth name in the order of how often the tool results
    list them, or the whole history writes them (ties by first occurrence), is the target of at
    most a quarter of concise Intersections at 4096 tokens."""
    env = rt.Cell("ALB-QA-v0", env_kwargs=rt.CELL_KWARGS["ALB-QA-v0"]).make()
    positions: dict[str, list[int]] = {"listed": [], "written": []}
    for seed in range(40):
        observation, _ = env.reset(seed=seed, options={"question_type": "intersection"})
        gold = rt.gold_answer(env)
        for kind, roles in (("listed", {"tool"}), ("written", {"assistant", "user", "tool"})):
            text = "\n".join(str(m.get("content") or "") for m in observation[1:-1] if m["role"] in roles)
            order = [name for name, _ in Counter(rt._NAME.findall(text)).most_common()]
            positions[kind].append(order.index(gold) + 1)
    for kind, found in positions.items():
        for n in range(1, 9):
            assert _held([float(p == n) for p in found], QA_TYPE_CEILING), (kind, n, found)


# -- finding 7: AgencyBench's rounds pay a grid filled without planning ------------------------


@pytest.mark.parametrize(
    "cell",
    [rt.Cell("ACE-course-scenario-v0"), rt.Cell("ACE-travel-v0", wrappers=("feedback_rounds",))],
    ids=lambda cell: cell.family,
)
def test_finding_7__a_grid_filled_without_planning_earns_little_on_agencybench_rounds(cell: rt.Cell) -> None:
    """A random slot-valid grid earned 0.914-0.963 and greedy-local 0.911-0.960 at 1944dd5, the
    solver 0.975-1.0: only the last hundredths carried the planning signal. Once the reward was
    the verdict, the scenario's solver earned 0.38-0.50: it filled each stage without seeing the
    next. A perfect planner now wins the whole reward; a random grid redrawn after each feedback
    round (``random-retry``) is held like a single one."""
    means = _means(cell, range(8), ("random-slot-valid", "random-retry", "solver"))
    assert rt.above_floor(cell, means, n=8, only=["random-slot-valid", "random-retry", "greedy"]) == []
    assert means["solver"] == means["solver-batch"] == 1.0, means  # planning wins it all


# -- finding 8: answer keys in info ------------------------------------------------------------


def test_finding_8__info_tells_no_unsolvable_kind() -> None:
    """UnsolvableMix put the kind in every step's ``info`` at 1944dd5: a harness forwarding
    ``info`` handed the model the answer (info-tell + solver earned 1.0 where solvable ones solve)."""
    cell = rt.Cell("ACE-travel-unsolvable-v0")
    means = _means(cell, range(20), ("info-tell+solver", "solver"))
    assert rt.above_floor(cell, means, n=20, only=["info-tell+solver"]) == []


def test_finding_8__alb_qa_reset_info_holds_no_gold_answer() -> None:
    """ALB-QA put the gold answer in reset ``info`` (``gt``) at 1944dd5: answering it earned 1.0."""
    cell = rt.Cell("ALB-QA-v0", env_kwargs=rt.CELL_KWARGS["ALB-QA-v0"])
    assert rt.above_floor(cell, rt.measure(cell, range(20), range(1000, 1010)), n=20, only=["info-oracle"]) == []


def _hidden_truth_ids(env: object) -> set[str]:
    """The truth ids of the hidden slots of the episode ``env`` plays (the grader's side: never a policy's)."""
    compiled = env.unwrapped.compiled  # type: ignore[attr-defined]
    shown = {compiled.item_ids[k] for k in compiled.initial if k >= 0}
    hidden = [compiled.item_ids[t] for t, k in zip(compiled.truth, compiled.initial, strict=True) if k < 0]
    return set(hidden) - shown


@pytest.mark.parametrize(
    "env_id",
    [cell.env_id for cell in CELLS if cell.kind == "tool-call" and not cell.fit and "10x10" not in cell.env_id],
)
def test_finding_8__no_info_before_the_last_step_holds_a_hidden_truth_id(env_id: str) -> None:
    """What a harness may forward (``info`` besides the texts the model is shown anyway) names no
    hidden slot's truth id, at reset or on any step before the episode ends."""
    env = rt.Cell(env_id).make()
    observation, info = env.reset(seed=0)
    truth = _hidden_truth_ids(env)
    assert truth and all(ITEM_ID.fullmatch(item) for item in truth)  # the search below can find them
    episode = rt.reference("greedy").start(observation, info, 0)
    seen, reply = [info], observation
    for _ in range(200):
        reply, _, terminated, truncated, step_info = env.step(episode.act(reply))
        if terminated or truncated:
            break
        seen.append(step_info)
    for found in seen:
        fields = {path: value for path, value in rt.info_fields(found) if path.split(".")[0] != "reply"}
        assert not [path for path, value in fields.items() if truth & set(ITEM_ID.findall(str(value)))], env_id

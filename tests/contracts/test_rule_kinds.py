"""The rule-kind table: one declaration per kind, read by every consumer, and each kind's semantics.

Every test here iterates :data:`RULE_KINDS` / :data:`SLOT_KINDS`, so a new kind is covered as
soon as it is declared (the sentence and plain-Python twin tables below fail until it has one).
"""

from __future__ import annotations

import ast
import dataclasses
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import gymnasium as gym
import numpy as np
import pytest

import ace_gym
from ace_gym.agents.solver import ExactSolver
from ace_gym.constraints import (
    RULE_KINDS,
    SLOT_KINDS,
    Aggregate,
    CompiledGlobalRule,
    Reading,
    RuleKind,
    RunningTotals,
    aggregate,
    compile_global_rule,
    components,
    first_global_violation,
    global_rule_text,
    read,
    slot_rule_mask,
    slot_rule_text,
    slot_rules_mask,
)
from ace_gym.domains import DOMAIN_NAMES, DOMAINS, CategoricalAttribute, Domain, GlobalRule, NumericAttribute
from ace_gym.domains.spec import GlobalRuleKindName, SlotRuleKindName
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.generators import certify, generate_dataset, generate_instance
from ace_gym.instance import CompiledInstance, resolve_dataset
from ace_gym.scoring import evaluate_grid

PACKAGE = Path(ace_gym.__file__).parent
TABLES = ("RULE_KINDS", "SLOT_KINDS")  # the assignments in constraints.py that may name kinds

# The published sentences, with workforce's item words, attribute hourly_cost, bound 17.
SENTENCES = {
    "sum_max": "the total hourly cost of all workers in the whole grid must be at most 17",
    "sum_min": "the total hourly cost of all workers in the whole grid must be at least 17",
    "repeat_max": "the same hourly cost can appear at most 17 times in the whole grid",
    "count_min": "there must be at least 17 workers in the whole grid whose hourly cost is night",
    "count_min_threshold": "there must be at least 17 workers in the whole grid whose hourly cost is at least 12",
    "max_row_sum": "for any single row in the whole grid, the total hourly cost must be at most 17",
    "max_cap": "the maximum hourly cost of any worker in the whole grid must be at most 17",
}
SLOT_SENTENCES = {
    "max": "the worker in slot (2, 3) must have hourly cost at most 17",
    "min": "the worker in slot (2, 3) must have hourly cost at least 17",
}


def _naive_aggregate(rule: GlobalRule, items: list[dict[str, Any]], grid: list[int], rows: int, cols: int) -> int:
    """Plain-Python twin of each kind's aggregate, from item dicts (``grid``: item index or -1)."""
    filled = [(cell, items[item]) for cell, item in enumerate(grid) if item >= 0]
    values = [item[rule.attribute] for _, item in filled]
    if rule.kind in ("sum_max", "sum_min"):
        return sum(values)
    if rule.kind == "count_min":
        return sum(value == rule.value for value in values)
    if rule.kind == "count_min_threshold":
        return sum(value >= rule.threshold for value in values)
    if rule.kind == "repeat_max":
        return max(Counter(values).values(), default=0)
    if rule.kind == "max_row_sum":
        totals = [0] * rows
        for cell, item in filled:
            totals[cell // cols] += item[rule.attribute]
        return max(totals)
    if rule.kind == "max_cap":
        return max(values, default=0)
    raise AssertionError(f"add a plain-Python twin for rule kind {rule.kind!r}")


# -- one home ---------------------------------------------------------------------------------------


def _kind_literals(source: str, allowed_assignments: tuple[str, ...] = ()) -> list[tuple[int, str]]:
    """(line, name) of every string constant in ``source`` that is a rule-kind name, skipping
    bare string statements (docstrings) and the top-level assignments to ``allowed_assignments``."""
    names = set(RULE_KINDS) | set(SLOT_KINDS)
    tree = ast.parse(source)
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skipped.add(id(node.value))
    for statement in tree.body:
        targets = (
            statement.targets
            if isinstance(statement, ast.Assign)
            else [statement.target]
            if isinstance(statement, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id in allowed_assignments for t in targets):
            skipped.update(id(node) for node in ast.walk(statement))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in names and id(node) not in skipped
    ]


def _package_sources() -> Iterator[Path]:
    return (path for path in sorted(PACKAGE.rglob("*.py")) if "domains" not in path.relative_to(PACKAGE).parts)


def test_rule_kind_names__appear_only_in_the_rule_table_and_the_domain_declarations() -> None:
    found = []
    for path in _package_sources():
        allowed = TABLES if path == PACKAGE / "constraints.py" else ()
        found += [
            f"{path.relative_to(PACKAGE)}:{line}: {name!r}" for line, name in _kind_literals(path.read_text(), allowed)
        ]
    assert not found, "rule kinds named outside ace_gym.constraints' tables:\n" + "\n".join(found)


def test_kind_literals__finds_code_literals_but_not_docstrings_or_the_table() -> None:
    source = '"""Docstring naming sum_max."""\nRULE_KINDS = {"sum_max": 1}\nif kind == "repeat_max" or kind == "min":\n    pass\n'
    assert _kind_literals(source, TABLES) == [(3, "repeat_max"), (3, "min")]
    assert [name for _, name in _kind_literals(source)] == ["sum_max", "repeat_max", "min"]


def test_rule_tables__declare_exactly_the_kinds_domains_may_use() -> None:
    assert set(RULE_KINDS) == set(get_args(GlobalRuleKindName))
    assert set(SLOT_KINDS) == set(get_args(SlotRuleKindName))
    assert all(name == kind.name for name, kind in RULE_KINDS.items())
    assert all(name == kind.name for name, kind in SLOT_KINDS.items())


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"upper": False, "aggregate": Aggregate.LARGEST}, "lower bound needs the TOTAL"),
        ({"reading": Reading.EQUAL, "aggregate": Aggregate.MOST_FREQUENT}, "reads attribute values"),
    ],
)
def test_rule_kind__rejects_combinations_components_cannot_express(arguments: dict[str, Any], problem: str) -> None:
    declaration = {"name": "new_kind", "upper": True, "text": "", "reading": Reading.VALUE}
    declaration.update(threshold_range=RULE_KINDS["sum_max"].threshold_range, aggregate=Aggregate.TOTAL)
    with pytest.raises(ValueError, match=problem):
        RuleKind(**{**declaration, **arguments})


# -- texts ------------------------------------------------------------------------------------------


def test_global_rule_text__every_kind_states_the_published_sentence() -> None:
    assert set(SENTENCES) == set(RULE_KINDS), "give every rule kind its sentence here"
    workforce = DOMAINS["workforce"]
    for name in RULE_KINDS:
        rule = GlobalRule("rule", name, "hourly_cost", value="night", threshold=12)  # type: ignore[arg-type]
        assert global_rule_text(rule, 17, workforce) == SENTENCES[name]


def test_slot_rule_text__every_kind_states_the_published_sentence() -> None:
    assert set(SLOT_SENTENCES) == set(SLOT_KINDS), "give every slot rule kind its sentence here"
    for name in SLOT_KINDS:
        assert slot_rule_text(DOMAINS["workforce"], 2, 3, "hourly_cost", name, 17) == SLOT_SENTENCES[name]


# -- semantics on random grids ----------------------------------------------------------------------


def _example_rule(kind: RuleKind, domain: Domain) -> GlobalRule:
    """A rule of ``kind`` on a fitting attribute of ``domain``: a category for EQUAL readings and
    frequencies, a number otherwise (threshold at mid-range, cap at the attribute's maximum)."""
    categorical = kind.reading is Reading.EQUAL or kind.aggregate is Aggregate.MOST_FREQUENT
    attribute = next(a for a in domain.attributes if isinstance(a, CategoricalAttribute) == categorical)
    if isinstance(attribute, CategoricalAttribute):
        return GlobalRule(f"every_{kind.name}", kind.name, attribute.name, slack=1, value=attribute.values[0])  # type: ignore[arg-type]
    assert isinstance(attribute, NumericAttribute)
    middle = (attribute.low + attribute.high) // 2
    return GlobalRule(
        f"every_{kind.name}",
        kind.name,  # type: ignore[arg-type]
        attribute.name,
        slack=2 * attribute.high,
        cap=attribute.high,
        floor=0,
        threshold=middle,
    )


def _compiled_rule(kind: RuleKind, compiled: CompiledInstance, rng: np.random.Generator) -> CompiledGlobalRule:
    rule = _example_rule(kind, compiled.domain)
    truth = compile_global_rule(rule, 0, compiled.domain, compiled.numeric, compiled.categorical)
    bound = aggregate(truth, compiled.truth, compiled.cols) + int(rng.integers(-2, 3))
    return compile_global_rule(rule, bound, compiled.domain, compiled.numeric, compiled.categorical)


def _random_grid(compiled: CompiledInstance, rng: np.random.Generator, empty_share: float) -> np.ndarray:
    grid = rng.integers(0, len(compiled.items), size=compiled.n_cells).astype(np.int32)
    grid[rng.random(compiled.n_cells) < empty_share] = -1
    return grid


def _cases(seed: int) -> Iterator[tuple[CompiledInstance, CompiledGlobalRule, np.ndarray]]:
    """Per domain: a random instance, a rule of the kind, and 12 random grids (some empty)."""
    rng = np.random.default_rng(seed)
    kind = RULE_KINDS[list(RULE_KINDS)[seed % len(RULE_KINDS)]]
    for domain in DOMAIN_NAMES:
        compiled = resolve_dataset("5x5", domain).compiled(int(rng.integers(35)))
        rule = _compiled_rule(kind, compiled, rng)
        for empty_share in (0.0, 0.0, 0.0, 0.3, 0.6, 1.0) * 2:
            yield compiled, rule, _random_grid(compiled, rng, empty_share)


KIND_SEEDS = [
    pytest.param(k + len(RULE_KINDS) * s, id=f"{name}-{s}") for s in range(2) for k, name in enumerate(RULE_KINDS)
]


@pytest.mark.parametrize("seed", KIND_SEEDS)
def test_aggregate__matches_a_plain_python_twin_for_every_kind(seed: int) -> None:
    for compiled, rule, grid in _cases(seed):
        spec = _example_rule(rule.kind, compiled.domain)
        expected = _naive_aggregate(spec, compiled.items, grid.tolist(), compiled.rows, compiled.cols)
        assert aggregate(rule, grid, compiled.cols) == expected, (rule.name, grid.tolist())


@pytest.mark.parametrize("seed", KIND_SEEDS)
def test_running_totals__agree_with_the_array_aggregate_for_every_kind_through_add_replace_remove(seed: int) -> None:
    for compiled, rule, grid in _cases(seed):
        totals = RunningTotals((rule,), compiled.cols)
        for cell, item in enumerate(grid.tolist()):
            if item >= 0:
                totals.add(cell, item)
        assert totals.value(0) == aggregate(rule, grid, compiled.cols), rule.name
        complete = bool((grid >= 0).all())
        assert totals.first_violation(complete) == first_global_violation((rule,), grid, compiled.cols)
        swapped = grid.copy()  # each filled cell's item replaced by the next filled cell's
        filled = np.flatnonzero(grid >= 0).tolist()
        for cell, other in zip(filled, filled[1:] + filled[:1], strict=True):
            totals.replace(cell, int(swapped[cell]), int(grid[other]))
            swapped[cell] = grid[other]
        assert totals.value(0) == aggregate(rule, swapped, compiled.cols), rule.name
        grid = swapped
        for cell in np.flatnonzero(grid >= 0).tolist():  # and back to empty, cell by cell
            totals.remove(cell, int(grid[cell]))
        assert totals.value(0) == 0


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_running_totals__built_on_a_grid_count_every_kind_as_each_rule_alone_does(domain: str) -> None:
    rng = np.random.default_rng(DOMAIN_NAMES.index(domain))
    compiled = resolve_dataset("5x5", domain).compiled(int(rng.integers(35)))
    # two rules of every kind, interleaved: each group holds several rules, in rule order
    rules = tuple(_compiled_rule(kind, compiled, rng) for _ in range(2) for kind in RULE_KINDS.values())
    empty = np.full(compiled.n_cells, -1, dtype=np.int32)
    grids = [
        compiled.initial,
        compiled.truth,
        empty,
        *[_random_grid(compiled, rng, share) for share in (0.3, 0.6, 0.9)],
    ]
    assert [RunningTotals(rules, compiled.cols).value(k) for k in range(len(rules))] == [0] * len(rules)
    for grid in grids:
        totals = RunningTotals(rules, compiled.cols, grid.tolist())
        for k, rule in enumerate(rules):
            assert totals.value(k) == aggregate(rule, grid, compiled.cols), (rule.name, grid.tolist())
        complete = bool((grid >= 0).all())
        assert totals.first_violation(complete) == first_global_violation(rules, grid, compiled.cols)
        # what is kept, not only its aggregate: counting every cell out again leaves nothing
        for cell in np.flatnonzero(grid >= 0).tolist():
            totals.remove(cell, int(grid[cell]))
        assert [totals.value(k) for k in range(len(rules))] == [0] * len(rules), grid.tolist()


@pytest.mark.parametrize("seed", KIND_SEEDS)
def test_components__are_violated_exactly_when_the_rule_is_on_complete_grids(seed: int) -> None:
    for compiled, rule, grid in _cases(seed):
        if (grid < 0).any():
            continue
        values = rule.contribution.astype(np.int64)[grid]
        violated = False
        codes = range(int(rule.contribution.max()) + 1)
        for test, parameter, sign, row, threshold in zip(
            *components(rule.kind, rule.bound, codes, compiled.rows), strict=True
        ):
            column = sign * read(test, values, parameter)
            in_row = np.arange(compiled.n_cells) // compiled.cols == row
            violated |= int(column[in_row].sum() if row >= 0 else column.sum()) > threshold
        assert violated == (not rule.satisfied(aggregate(rule, grid, compiled.cols), complete=True)), rule.name


@pytest.mark.parametrize("seed", KIND_SEEDS)
def test_largest_aggregate__is_reached_by_a_grid_of_the_top_item_and_never_exceeded(seed: int) -> None:
    for compiled, rule, grid in _cases(seed):
        spec = _example_rule(rule.kind, compiled.domain)
        numeric = compiled.numeric.get(spec.attribute)
        largest = rule.kind.largest_aggregate(
            0 if numeric is None else int(numeric.max()), compiled.rows, compiled.cols
        )
        assert aggregate(rule, grid, compiled.cols) <= largest
        top = np.full(compiled.n_cells, int(np.argmax(rule.contribution)), dtype=np.int32)
        assert aggregate(rule, top, compiled.cols) == largest, rule.name


def test_slot_rules_mask__matches_slot_rule_mask_per_rule() -> None:
    rng = np.random.default_rng(3)
    kinds = [str(k) for k in rng.choice(list(SLOT_KINDS), size=200)]
    values, bounds = rng.integers(0, 10, size=200), rng.integers(0, 10, size=200)
    expected = [bool(slot_rule_mask(values[i : i + 1], kind, int(bounds[i]))[0]) for i, kind in enumerate(kinds)]
    assert slot_rules_mask(values, kinds, bounds).tolist() == expected


def test_components__lower_bounds_are_negated_totals() -> None:
    found = components(RULE_KINDS["sum_min"], 9, (), 3)
    assert (found.tests, found.signs, found.rows, found.thresholds) == ([Reading.VALUE], [-1], [-1], [-9])


# -- every consumer on a domain that declares every kind ----------------------------------------------


@pytest.fixture
def every_kind(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A registered variant of ``course`` with one extra global rule of every kind."""
    course = DOMAINS["course"]
    extra = tuple(_example_rule(kind, course) for kind in RULE_KINDS.values())
    variant = dataclasses.replace(course, name="everykind", global_rules=course.global_rules + extra)
    monkeypatch.setitem(DOMAINS, variant.name, variant)
    yield variant.name
    # every id an episode spec registered for it (the benchmarks' per-domain ids too)
    for env_id in [i for i in gym.registry if i.startswith("ACE-everykind-")]:
        gym.registry.pop(env_id)


def test_every_kind__generator_certificate_scoring_and_solver_agree(every_kind: str, tmp_path: Path) -> None:
    path = tmp_path / "every_kind.json"
    generate_dataset(every_kind, rows=4, cols=5, hidden_slots=[3, 8], decoy_budgets=[0, 6], seed=5, path=path)
    written = json.loads(path.read_text())["instances"]
    assert len(written) == 4 and all(instance["meta"]["certificate"]["holds"] for instance in written)
    for record in run_episodes(
        [EpisodeSpec.of(every_kind, str(path), instance_index=i) for i in range(4)], ExactSolver()
    ):
        assert record["score"] == 1, (record["instance_id"], record["reason"], record["notes"])
    instance = generate_instance(every_kind, rows=4, cols=5, hidden_slots=8, decoy_budget=6, seed=9)
    compiled = CompiledInstance(instance, DOMAINS[every_kind])
    assert certify(compiled).holds
    assert evaluate_grid(compiled, compiled.truth) == (True, None)
    reasons = {rule.reason for rule in compiled.global_rules}
    for entry, slot in zip(instance.slots, compiled.slots, strict=True):
        for decoy in entry.decoy_ids:
            grid = compiled.truth.copy()
            grid[slot.cell] = compiled.item_index[decoy]
            assert evaluate_grid(compiled, grid)[1] in reasons

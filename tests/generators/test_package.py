"""The generator: certified instances across domains and sizes, the published layout, fixed tells,
determinism and typed errors for impossible configurations."""

from __future__ import annotations

import hashlib
import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ace_gym.domains import DOMAIN_NAMES, NumericAttribute, get_domain
from ace_gym.errors import ConfigError
from ace_gym.generators import GenerationError, InstanceConfig, certify, generate_dataset, generate_instance
from ace_gym.generators.config import MAX_CELLS, MAX_POOL_ITEMS, MAX_ROWS
from ace_gym.instance import CompiledInstance, Instance, load_dataset, parse_dataset

# (rows, cols, hidden_slots, decoy_budget, candidates_per_slot): mostly small, a few larger
SIZES = [
    (3, 3, 1, 0, 25),
    (3, 3, 1, 6, 10),
    (3, 3, 4, 4, 25),
    (3, 4, 6, 9, 12),
    (4, 4, 8, 10, 25),
    (5, 5, 5, 4, 25),
    (5, 5, 11, 15, 25),
    (5, 5, 15, 19, 25),
    (5, 7, 7, 8, 25),
    (5, 7, 21, 25, 25),
    (2, 8, 16, 12, 25),
    (6, 6, 20, 30, 25),
]
SEEDS = range(3)  # 6 domains x 12 sizes x 3 seeds = 216 instances


def _generate(domain: str, size: tuple[int, int, int, int, int], seed: int) -> Instance:
    rows, cols, hidden, budget, candidates = size
    return generate_instance(
        domain,
        rows=rows,
        cols=cols,
        hidden_slots=hidden,
        decoy_budget=budget,
        candidates_per_slot=candidates,
        seed=seed,
    )


@pytest.fixture(scope="module")
def instances() -> list[Instance]:
    return [_generate(domain, size, seed) for domain in DOMAIN_NAMES for size in SIZES for seed in SEEDS]


def test_generate_instance__certificates_hold_on_216_instances(instances: list[Instance]) -> None:
    assert len(instances) >= 200
    for instance in instances:
        reloaded = Instance.model_validate_json(instance.model_dump_json())
        certificate = certify(reloaded)
        assert certificate.holds, (instance.instance_id, certificate.problems)
        assert instance.meta.certificate == certificate.as_dict()  # type: ignore[attr-defined]
        assert certificate.alternatives == instance.meta.branch_budget


def test_generate_instance__structure_follows_the_spec(instances: list[Instance]) -> None:
    for instance in instances:
        meta, slots = instance.meta, instance.slots
        budget, hidden = meta.branch_budget, meta.hidden_slots
        assert instance.instance_id == f"{instance.domain}_r{meta.rows}_c{meta.cols}_h{hidden}_b{budget}"
        assert len(slots) == hidden
        assert meta.candidates_per_slot == max(meta.requested_candidates_per_slot, budget + 2)
        assert sum(meta.branch_budget_allocations) == budget
        branch = [s for s in slots if s.is_branch_slot]
        assert [s.branch_rank for s in branch] == list(range(meta.branch_slot_count))
        assert [s.allocated_budget for s in branch] == meta.branch_budget_allocations
        expected_k = 0 if budget == 0 else min(hidden, int(np.ceil(np.sqrt(budget))))
        assert meta.branch_slot_count <= expected_k
        cap = budget if meta.branch_slot_count <= 2 else budget // 2
        assert all(1 <= a <= cap for a in meta.branch_budget_allocations)
        rules_per_slot = min(3, len(get_domain(instance.domain).slot_rules)) if hidden == 1 else 2
        for slot in slots:
            assert len(slot.slot_constraints["active_rule_names"]) == rules_per_slot  # type: ignore[arg-type]
            assert len(slot.candidate_ids) == meta.candidates_per_slot
            assert len(slot.decoy_ids) == slot.allocated_budget
            assert len(slot.filter_candidate_ids) == meta.candidates_per_slot - 1 - slot.allocated_budget
            assert set(slot.candidate_ids) == {slot.truth_id, *slot.decoy_ids, *slot.filter_candidate_ids}
        labels = {s.decoy_generation_final_stage_label for s in branch}
        assert labels <= {"tier_1", "tier_2", "tier_3", "hard_only", "last_branch_hard_only"}
        if branch:
            assert branch[-1].decoy_generation_final_stage_label == "last_branch_hard_only"
            assert meta.decoy_generation_final_stage == max(s.decoy_generation_final_stage for s in branch)  # type: ignore[type-var]
        else:
            assert meta.decoy_generation_final_stage_label == "not_applicable"


def test_generate_instance__truth_is_the_only_valid_completion_by_brute_force(instances: list[Instance]) -> None:
    """Independent of the certificate's algebra: enumerate every slot-valid grid and score it."""
    from itertools import product

    from ace_gym.scoring import evaluate_grid

    checked = 0
    for instance in instances:
        compiled = CompiledInstance(instance, get_domain(instance.domain))
        options = [sorted(slot.valid_items) for slot in compiled.slots]
        if instance.meta.certificate["combinations"] > 3000:  # type: ignore[attr-defined]
            continue
        valid = []
        for choice in product(*options):
            grid = compiled.truth.copy()
            for slot, item in zip(compiled.slots, choice, strict=True):
                grid[slot.cell] = item
            if evaluate_grid(compiled, grid)[0]:
                valid.append(choice)
        assert valid == [tuple(int(compiled.truth[s.cell]) for s in compiled.slots)], instance.instance_id
        checked += 1
    assert checked >= 100


def test_generate_instance__names_do_not_reveal_the_truth(instances: list[Instance]) -> None:
    smallest = total = 0
    for instance in instances:
        number = {i: int(str(item["name"]).rsplit(" ", 1)[1]) for i, item in instance.item_pool.items()}
        for slot in instance.slots:
            total += 1
            smallest += number[slot.truth_id] == min(number[c] for c in slot.candidate_ids)
        assert len(set(number.values())) == len(number)
    assert smallest / total < 0.15  # the published data: 100 %; uniform: about 1/K


def test_generate_instance__items_stay_inside_natural_ranges(instances: list[Instance]) -> None:
    for instance in instances:
        domain = get_domain(instance.domain)
        for attribute in domain.attributes:
            values = [item[attribute.name] for item in instance.item_pool.values()]
            if isinstance(attribute, NumericAttribute):
                assert attribute.low <= min(values) and max(values) <= attribute.high  # type: ignore[operator]
            else:
                assert set(values) <= set(attribute.values)


def test_generate_instance__no_slot_rule_is_vacuous(instances: list[Instance]) -> None:
    for instance in instances:
        domain = get_domain(instance.domain)
        rules = {rule.name: rule for rule in domain.slot_rules}
        for slot in instance.slots:
            for name in slot.slot_constraints["active_rule_names"]:  # type: ignore[union-attr]
                rule, value = rules[name], slot.slot_constraints[name]
                attribute = domain.attribute(rule.attribute)
                assert isinstance(attribute, NumericAttribute)
                assert value < attribute.high if rule.kind == "max" else value > attribute.low  # type: ignore[operator]


def test_generate_instance__uses_the_domain_item_ids_and_names() -> None:
    instance = generate_instance("workforce", rows=3, cols=3, hidden_slots=2, decoy_budget=2, seed=5)
    for item_id, item in instance.item_pool.items():
        assert item_id.startswith("W") and item_id[1:].isdigit() and item["worker_id"] == item_id
        assert str(item["name"]).startswith("Worker ")
    course = generate_instance("course", rows=3, cols=3, hidden_slots=2, decoy_budget=2, seed=5)
    phrases = get_domain("course").name_phrases
    for item in course.item_pool.values():
        phrase = str(item["name"]).rsplit(" ", 1)[0]
        assert phrase in phrases[str(item["category"])]


def test_generate_instance__is_a_pure_function_of_its_arguments() -> None:
    arguments = {"rows": 5, "cols": 7, "hidden_slots": 11, "decoy_budget": 15, "seed": 11}
    first = generate_instance("meal", **arguments).model_dump_json()  # type: ignore[arg-type]
    assert generate_instance("meal", **arguments).model_dump_json() == first  # type: ignore[arg-type]
    assert generate_instance("meal", **{**arguments, "seed": 12}).model_dump_json() != first  # type: ignore[arg-type]
    code = (
        "import hashlib, sys; from ace_gym.generators import generate_instance; "
        "i = generate_instance('meal', rows=5, cols=7, hidden_slots=11, decoy_budget=15, seed=11); "
        "sys.stdout.write(hashlib.sha256(i.model_dump_json().encode()).hexdigest())"
    )
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": "123"}
    )
    assert other.stdout == hashlib.sha256(first.encode()).hexdigest()


def test_generate_dataset__byte_identical_for_any_worker_count(tmp_path: Path) -> None:
    arguments = {"rows": 4, "cols": 5, "hidden_slots": [1, 6, 12], "decoy_budgets": [0, 5, 9], "seed": 42}
    one = generate_dataset("travel", path=tmp_path / "one.json", workers=1, **arguments)  # type: ignore[arg-type]
    generate_dataset("travel", path=tmp_path / "two.json", workers=2, **arguments)  # type: ignore[arg-type]
    generate_dataset("travel", path=tmp_path / "two.json.gz", workers=2, **arguments)  # type: ignore[arg-type]
    assert (tmp_path / "one.json").read_bytes() == (tmp_path / "two.json").read_bytes()
    dataset = load_dataset(tmp_path / "two.json.gz")
    assert [i.instance_id for i in dataset] == [f"travel_r4_c5_h{h}_b{b}" for h in (1, 6, 12) for b in (0, 5, 9)]
    assert json.loads((tmp_path / "one.json").read_bytes()) == one


def test_generate_dataset__writes_the_published_key_order(tmp_path: Path) -> None:
    generate_dataset("shopping", rows=3, cols=3, hidden_slots=[2], decoy_budgets=[2], seed=1, path=tmp_path / "d.json")
    text = (tmp_path / "d.json").read_text()
    data = json.loads(text)
    assert list(data) == [
        "domain",
        "num_instances",
        "rows",
        "cols",
        "hidden_slots",
        "branch_budget",
        "candidates_per_slot",
        "instances",
    ]
    instance = data["instances"][0]
    assert list(instance) == [
        "domain",
        "meta",
        "global_constraints",
        "item_pool",
        "truth_solution",
        "partial_solution",
        "hidden_slots",
        "slots",
        "task_instruction",
        "instance_id",
    ]
    assert list(instance["meta"])[:10] == [
        "rows",
        "cols",
        "hidden_slots",
        "branch_budget",
        "branch_slot_count",
        "branch_budget_allocations",
        "candidates_per_slot",
        "requested_candidates_per_slot",
        "decoy_generation_final_stage",
        "decoy_generation_final_stage_label",
    ]
    assert next(iter(instance["global_constraints"])) == "global"
    assert text == json.dumps(data, indent=2)
    parse_dataset(text, "roundtrip")


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"domain": "cours"}, "domain"),
        ({"hidden_slots": 10, "rows": 3, "cols": 3}, "hidden_slots"),
        ({"hidden_slots": 0}, "hidden_slots"),
        ({"decoy_budget": -1}, "decoy_budget"),
        ({"rows": 0}, "rows"),
        ({"cols": 2.5}, "cols"),
        ({"candidates_per_slot": 0}, "candidates_per_slot"),
        ({"seed": -3}, "seed"),
        ({"seed": "7"}, "seed"),
        ({"rows": 200, "cols": 200}, "rows*cols"),
        ({"rows": 10_000, "cols": 1, "hidden_slots": 1}, "rows"),
        ({"decoy_budget": 10**9}, "decoy_budget"),
        ({"candidates_per_slot": 10**9}, "candidates_per_slot"),
        ({"rows": 100, "cols": 100, "hidden_slots": 10_000}, "candidates_per_slot"),
        ({"time_budget": -1.0}, "time_budget"),
        ({"max_attempts": 0}, "max_attempts"),
    ],
)
def test_generate_instance__impossible_config_raises_config_error(arguments: dict, field: str) -> None:
    full = {"domain": "course", "rows": 5, "cols": 7, "hidden_slots": 5, "decoy_budget": 4, "seed": 0, **arguments}
    domain = full.pop("domain")
    with pytest.raises(ConfigError) as raised:
        generate_instance(domain, **full)
    assert raised.value.field == field


def test_instance_config__pool_limit_gives_the_largest_decoy_budget_and_candidate_count() -> None:
    cells, hidden = 10 * 10, 60
    largest_candidates = (MAX_POOL_ITEMS - cells) // hidden + 1
    InstanceConfig("travel", 10, 10, hidden, largest_candidates - 2, largest_candidates, 0)  # pool exactly full
    assert cells + hidden * (largest_candidates - 1) <= MAX_POOL_ITEMS
    with pytest.raises(ConfigError, match=f"at most {largest_candidates - 2} on a 10x10 grid with hidden_slots=60"):
        InstanceConfig("travel", 10, 10, hidden, largest_candidates - 1, 25, 0)
    with pytest.raises(ConfigError, match=f"at most {largest_candidates} on a 10x10 grid"):
        InstanceConfig("travel", 10, 10, hidden, 0, largest_candidates + 1, 0)
    InstanceConfig("travel", MAX_ROWS, MAX_CELLS // MAX_ROWS, 1, 0, 25, 0)  # the largest grid


def test_generate_instance__unknown_domain_suggests_the_closest() -> None:
    with pytest.raises(ConfigError, match="did you mean 'course'"):
        generate_instance("cours", hidden_slots=1, decoy_budget=0, seed=0)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"hidden_slots": [1, 1]}, "hidden_slots"),
        ({"decoy_budgets": []}, "decoy_budgets"),
        ({"workers": 0}, "workers"),
        ({"hidden_slots": [1, 40]}, "hidden_slots"),
    ],
)
def test_generate_dataset__invalid_config_raises_before_any_work(arguments: dict, field: str, tmp_path: Path) -> None:
    full = {"hidden_slots": [1], "decoy_budgets": [0], "seed": 0, "path": tmp_path / "x.json", **arguments}
    with pytest.raises(ConfigError) as raised:
        generate_dataset("course", **full)
    assert raised.value.field == field
    assert not (tmp_path / "x.json").exists()


def test_generate_instance__hard_config_reports_what_was_tried() -> None:
    failures = []
    for seed in range(40):
        try:
            generate_instance("course", rows=5, cols=5, hidden_slots=1, decoy_budget=8, seed=seed, max_attempts=1)
        except GenerationError as error:
            failures.append(error)
    assert failures, "some single attempts are expected to fail for course H=1 B=8"
    error = failures[0]
    assert error.attempts == 1 and sum(error.reasons.values()) == 1
    assert "after 1 derived seeds" in str(error) and "decoy" in str(error)
    copy = pickle.loads(pickle.dumps(error))  # raised inside generate_dataset worker processes
    assert (str(copy), copy.reasons, copy.config) == (str(error), error.reasons, error.config)


def test_generate_dataset__worker_failure_reaches_the_caller(tmp_path: Path) -> None:
    seed = next(
        s for s in range(40) if _fails_first_attempt("course", rows=5, cols=5, hidden_slots=1, decoy_budget=8, seed=s)
    )
    # both jobs may fail (time_budget=0 allows one attempt each); whichever worker fails first is raised
    with pytest.raises(GenerationError, match=r"course 5x5 hidden_slots=[12] decoy_budget=8"):
        generate_dataset(
            "course",
            rows=5,
            cols=5,
            hidden_slots=[1, 2],
            decoy_budgets=[8],
            seed=seed,
            time_budget=0,
            workers=2,
            path=tmp_path / "never.json",
        )
    assert not (tmp_path / "never.json").exists()


def _fails_first_attempt(domain: str, **arguments: int) -> bool:
    try:
        generate_instance(domain, max_attempts=1, **arguments)  # type: ignore[arg-type]
    except GenerationError:
        return True
    return False


def test_cli_generate__writes_named_files_with_a_progress_bar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ace_gym.cli import main

    argv = ["generate", "--domains", "meal", "workforce", "--rows", "3", "--cols", "4", "--hidden-slots", "2", "5"]
    argv += ["--decoy-budgets", "0", "3", "--seed", "9", "--gzip", "--out", str(tmp_path)]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    for domain in ("meal", "workforce"):
        path = tmp_path / f"{domain}_dataset_r3_c4_h2-5_cand25_budget0-3_seed9.json.gz"
        assert str(path) in out.splitlines()
        assert [i.instance_id for i in load_dataset(path)] == [
            f"{domain}_r3_c4_h{h}_b{b}" for h in (2, 5) for b in (0, 3)
        ]
        assert f"{domain}: 100%" in err and "4/4" in err


def test_cli_generate__impossible_config_exits_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ace_gym.cli import main

    argv = ["generate", "--domains", "course", "--rows", "2", "--cols", "2", "--hidden-slots", "5"]
    assert main([*argv, "--out", str(tmp_path)]) == 2
    assert not list(tmp_path.iterdir())
    assert "hidden_slots=5: a 2x2 grid has only 4 cells" in capsys.readouterr().err

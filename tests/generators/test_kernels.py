"""The separable test and the numba kernel agree with their plain-Python twins; the facade
validates its inputs and loads numba only for the exact search; the certificate agrees with the
published data and catches broken instances."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ace_gym.domains import DOMAIN_NAMES, get_domain
from ace_gym.generators import _kernels, certify, generate_instance
from ace_gym.generators.combinations import breaks_every_combination, every_combination_violates
from ace_gym.instance import CompiledInstance, Instance, resolve_dataset
from ace_gym.scoring import evaluate_grid

ROOT = Path(__file__).resolve().parents[2]


def _random_case(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    width = int(rng.integers(1, 6))
    groups = int(rng.integers(0, 5))
    sizes = rng.integers(1, 4, size=groups)
    base = rng.integers(-5, 6, size=width)
    thresholds = rng.integers(-3, 8, size=width)
    deltas = rng.integers(-4, 5, size=(int(sizes.sum()), width))
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    return base, thresholds, deltas, offsets


def _break_mask_twin(base: np.ndarray, slack: np.ndarray, thresholds: np.ndarray, rows: np.ndarray) -> list[bool]:
    """Plain-Python twin of :func:`breaks_every_combination`."""
    return [
        any(int(b) + int(s) + int(r) > int(t) for b, s, r, t in zip(base, slack, row, thresholds, strict=True))
        for row in rows
    ]


def test_breaks_every_combination__agrees_with_twin_on_random_inputs() -> None:
    rng = np.random.default_rng(0)
    for _ in range(300):
        width, count = int(rng.integers(1, 8)), int(rng.integers(0, 12))
        base, slack = rng.integers(-20, 20, size=width), -rng.integers(0, 10, size=width)
        thresholds, rows = rng.integers(-10, 25, size=width), rng.integers(-10, 10, size=(count, width))
        mask = breaks_every_combination(base, slack, thresholds, rows)
        assert mask.dtype == np.bool_ and mask.shape == (count,)
        assert mask.tolist() == _break_mask_twin(base, slack, thresholds, rows)


def test_all_violate_kernel__agrees_with_exhaustive_twin_on_random_inputs() -> None:
    rng = np.random.default_rng(1)
    outcomes = set()
    for _ in range(500):
        base, thresholds, deltas, offsets = _random_case(rng)
        expected = _kernels.all_violate_twin(base, thresholds, deltas, offsets)
        status, _ = _kernels.all_violate_kernel(base, thresholds, deltas, offsets, 10**6)
        assert status == expected
        assert _kernels.all_violate_kernel.py_func(base, thresholds, deltas, offsets, 10**6)[0] == expected
        groups = [deltas[offsets[g] : offsets[g + 1]] for g in range(len(offsets) - 1)]
        assert every_combination_violates(base, thresholds, groups) is bool(expected)
        outcomes.add(expected)
    assert outcomes == {0, 1}  # both verdicts exercised


def test_all_violate_kernel__separable_proof_implies_exact_verdict() -> None:
    rng = np.random.default_rng(2)
    for _ in range(300):
        base, thresholds, deltas, offsets = _random_case(rng)
        slack = np.zeros_like(base)
        for g in range(len(offsets) - 1):
            if offsets[g + 1] > offsets[g]:
                slack += np.minimum(deltas[offsets[g] : offsets[g + 1]].min(axis=0), 0)
        if breaks_every_combination(np.zeros_like(base), slack, thresholds, base[None, :])[0]:
            assert _kernels.all_violate_twin(base, thresholds, deltas, offsets) == 1


def test_all_violate_kernel__reports_undecided_at_the_node_limit() -> None:
    # each component alone can be pushed under its threshold, never both: only search decides
    groups = [np.array([[-1, 5], [5, -1]], dtype=np.int64)] * 6
    base, thresholds = np.array([1, 1]), np.array([0, 0])
    assert every_combination_violates(base, thresholds, groups, node_limit=5) is None
    assert every_combination_violates(base, thresholds, groups) is True


def test_facade__rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="slack"):
        breaks_every_combination(np.zeros(3), np.zeros(2), np.zeros(3), np.zeros((1, 3)))
    with pytest.raises(ValueError, match="candidate_rows"):
        breaks_every_combination(np.zeros(3), np.zeros(3), np.zeros(3), np.zeros((1, 2)))
    with pytest.raises(ValueError, match="group_deltas"):
        every_combination_violates(np.zeros(2), np.zeros(2), [np.zeros((2, 3))])


def test_generate_instance__loads_numba_only_when_the_exact_search_runs() -> None:
    """Loading numba and its cached code costs ~0.4 s per process: a small instance that the
    separable test settles must not pay it; the exact search loads it on first use."""
    code = (
        "import sys\n"
        "import numpy as np\n"
        "from ace_gym.generators import certify, generate_instance\n"
        "from ace_gym.generators.combinations import every_combination_violates\n"
        "certificate = certify(generate_instance('course', rows=5, cols=5, hidden_slots=5, decoy_budget=4, seed=42))\n"
        "assert certificate.holds and certificate.pairs_searched == 0, certificate\n"
        "assert 'numba' not in sys.modules, 'generating a small instance loaded numba'\n"
        "assert every_combination_violates(np.array([1]), np.array([0]), [np.array([[-1]])]) is False\n"
        "assert 'numba' in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_certify__holds_on_every_published_5x5_instance(domain: str) -> None:
    dataset = resolve_dataset("5x5", domain)
    certificates = [certify(dataset.compiled(i)) for i in range(len(dataset))]
    assert all(c.holds for c in certificates), [c.problems for c in certificates if not c.holds]


def _tampered(instance: Instance, change) -> Instance:  # type: ignore[no-untyped-def]
    record = instance.model_dump(mode="json")
    change(record)
    return Instance.model_validate(record)


@pytest.fixture(scope="module")
def branchy() -> Instance:
    return generate_instance("course", rows=4, cols=4, hidden_slots=6, decoy_budget=6, seed=3)


def test_certify__detects_a_second_valid_completion(branchy: Instance) -> None:
    def loosen(record: dict) -> None:
        for rule in list(record["global_constraints"])[1:]:
            record["global_constraints"][rule] = 10**6 if "max" in rule else 0

    certificate = certify(_tampered(branchy, loosen))
    assert certificate.truth_valid and certificate.truth_unique is False and not certificate.holds


def test_certify__detects_a_filter_that_passes_its_rules(branchy: Instance) -> None:
    def relax(record: dict) -> None:
        slot = record["slots"][0]
        slot["filter_candidate_ids"].append(slot["truth_id"])

    certificate = certify(_tampered(branchy, relax))
    assert not certificate.filters_fail_slot_rules and not certificate.holds


def test_certify__detects_a_decoy_that_fails_its_rules(branchy: Instance) -> None:
    def mislabel(record: dict) -> None:
        slot = next(s for s in record["slots"] if s["is_branch_slot"])
        slot["decoy_ids"].append(slot["filter_candidate_ids"][0])

    certificate = certify(_tampered(branchy, mislabel))
    assert not certificate.decoys_pass_slot_rules and not certificate.holds


def test_certify__detects_a_truth_that_breaks_a_global_rule(branchy: Instance) -> None:
    def tighten(record: dict) -> None:
        record["global_constraints"]["total_price_max"] = 0

    certificate = certify(_tampered(branchy, tighten))
    assert not certificate.truth_valid and not certificate.holds


def _valid_completions(compiled: CompiledInstance) -> int:
    """Brute force with the core scorer: how many slot-valid grids pass every rule."""
    options = [sorted(slot.valid_items) for slot in compiled.slots]
    count = 0
    for choice in itertools.product(*options):
        grid = compiled.truth.copy()
        for slot, item in zip(compiled.slots, choice, strict=True):
            grid[slot.cell] = item
        count += evaluate_grid(compiled, grid)[0]
    return count


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_certify__uniqueness_verdict_matches_brute_force_under_perturbed_thresholds(domain: str) -> None:
    """Shifting the global thresholds makes some instances ambiguous and some still unique; the
    certificate (separable test + exact search) must agree with enumeration either way."""
    rng = np.random.default_rng(7)
    verdicts = set()
    searched = 0
    for seed in range(4):
        instance = generate_instance(
            domain, rows=3, cols=4, hidden_slots=4, decoy_budget=6, candidates_per_slot=8, seed=seed
        )
        for _ in range(6):
            record = instance.model_dump(mode="json")
            for name, value in list(record["global_constraints"].items())[1:]:
                record["global_constraints"][name] = int(value + rng.integers(-2, 3) * max(1, abs(value) // 20))
            perturbed = Instance.model_validate(record)
            compiled = CompiledInstance(perturbed, get_domain(domain))
            certificate = certify(compiled)
            if not certificate.truth_valid:
                continue
            unique = _valid_completions(compiled) == 1
            assert certificate.truth_unique is unique
            verdicts.add(unique)
            searched += certificate.pairs_searched
    assert verdicts == {True, False}
    assert searched > 0  # the exact search, not only the separable test, was exercised

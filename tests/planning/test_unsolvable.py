"""Unsolvable variants: every certificate confirmed by brute force over all completions of small
instances; the solvable original keeps exactly one solution; variants are a pure function of
(instance, kind, seed)."""

from __future__ import annotations

import numpy as np
import pytest

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.instance import resolve_dataset
from ace_gym.planning.taxonomy import UNSOLVABLE_KINDS
from ace_gym.planning.unsolvable import (
    APPROVAL_POLICY,
    PHONE_LIMIT,
    check_certificate,
    compile_instance,
    make_variant,
)
from tests.planning.helpers import tiny_instance, valid_completions

SEEDS = range(4)
AMBIGUOUS = ("missing_information", "missing_attachment")


def _count(instance: object, limit: int = 10**6) -> int:
    count = 0
    for _ in valid_completions(compile_instance(instance)):  # type: ignore[arg-type]
        count += 1
        if count >= limit:
            break
    return count


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_variants__certificates_hold_by_brute_force_on_small_instances(domain: str) -> None:
    constructions = set()
    for seed in SEEDS:
        instance = tiny_instance(domain, seed)
        assert _count(instance) == 1  # the solvable copy: exactly one solution
        for kind in UNSOLVABLE_KINDS:
            for draw in range(3):
                variant = make_variant(instance, kind, np.random.default_rng(draw))
                if variant is None:
                    assert kind in ("conflicting_constraints", *AMBIGUOUS)
                    continue
                constructions.add(variant.certificate["construction"])
                assert check_certificate(variant)
                extra = variant.instance.meta.model_extra or {}
                assert extra["unsolvable"] == {"kind": kind} and "certificate" not in extra
                solutions = _count(variant.instance)
                if kind == "conflicting_constraints":
                    assert solutions == 0
                elif kind in AMBIGUOUS:
                    assert solutions >= 2
                else:  # the grid is unchanged; the approval policy, unapprovable, blocks every completion
                    assert solutions == 1 and variant.certificate["empty_cells"] >= 1
                    assert variant.approval == {"tool_outage": "outage", "missing_tool": "missing"}[kind]
    assert constructions >= {"slot_rule", "global_bound", "approval_policy"}
    assert constructions & {"withheld_bound", "withheld_slot_rules"}


@pytest.mark.parametrize("kind", UNSOLVABLE_KINDS)
def test_make_variant__is_a_pure_function_of_instance_kind_and_seed(kind: str) -> None:
    instance = resolve_dataset("5x5", "course")[20]
    first = make_variant(instance, kind, np.random.default_rng(7))
    again = make_variant(instance, kind, np.random.default_rng(7))
    assert first is not None and again is not None
    assert first.instance.model_dump_json() == again.instance.model_dump_json()
    assert first.record() == again.record()
    assert instance.meta.model_extra == {}  # the original is untouched


def test_variant_texts__state_what_the_agent_can_know() -> None:
    instance = resolve_dataset("5x5", "travel")[20]
    outage = make_variant(instance, "tool_outage", np.random.default_rng(0))
    assert outage is not None and APPROVAL_POLICY in outage.instance.task_instruction
    information = make_variant(instance, "missing_information", np.random.default_rng(0))
    assert information is not None and PHONE_LIMIT in information.instance.task_instruction
    attachment = make_variant(instance, "missing_attachment", np.random.default_rng(0))
    assert attachment is not None
    for row, col in attachment.attachment_cells:
        assert f"slot ({row}, {col}) must" not in attachment.instance.task_instruction


def test_check_certificate__rejects_a_variant_whose_claim_is_false() -> None:
    instance = tiny_instance("meal", 0)
    variant = make_variant(instance, "conflicting_constraints", np.random.default_rng(0))
    assert variant is not None
    original = variant.__class__(variant.kind, instance, variant.certificate)
    assert not check_certificate(original)
    ambiguous = make_variant(instance, "missing_attachment", np.random.default_rng(0))
    if ambiguous is not None:
        assert not check_certificate(ambiguous.__class__(ambiguous.kind, instance, ambiguous.certificate))


def test_make_variant__unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown unsolvable kind"):
        make_variant(tiny_instance("course", 0), "impossible", np.random.default_rng(0))

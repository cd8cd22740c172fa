"""Unsolvable variants: every certificate confirmed by brute force over all completions of small
instances; the solvable original keeps exactly one solution; an approval that cannot be had
covers an item of every completion in the approval kinds and of none of the truth's in a
solvable task (issue 38); variants are a pure function of (instance, kind, seed)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.instance import resolve_dataset
from ace_gym.planning.taxonomy import UNSOLVABLE_KINDS
from ace_gym.planning.unsolvable import (
    APPROVAL_POLICY_PATTERN,
    PHONE_LIMIT,
    add_markers,
    approval_policy,
    check_certificate,
    compile_instance,
    make_variant,
    needs_approval,
)
from tests.planning.helpers import tiny_instance, valid_completions

SEEDS = range(4)
AMBIGUOUS = ("missing_information", "missing_attachment")


def _covered_in_every_completion(instance: object, rule: tuple[str, int]) -> list[bool]:
    """For each completion of ``instance``: whether it holds an item the approval ``rule`` covers."""
    compiled = compile_instance(instance)  # type: ignore[arg-type]
    covered = needs_approval(compiled, rule)
    return [any(compiled.item_ids[i] in covered for i in choice) for choice in valid_completions(compiled)]


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
                else:  # the grid is unchanged; every completion needs an approval that cannot be had
                    assert solutions == 1 and variant.approval_rule is not None
                    assert _covered_in_every_completion(variant.instance, variant.approval_rule) == [True]
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
    assert outage is not None and outage.approval_rule is not None
    found = APPROVAL_POLICY_PATTERN.search(outage.instance.task_instruction)
    attribute, threshold = outage.approval_rule
    assert found is not None and found.groups() == (attribute.replace("_", " "), str(threshold))
    information = make_variant(instance, "missing_information", np.random.default_rng(0))
    assert information is not None and PHONE_LIMIT in information.instance.task_instruction
    attachment = make_variant(instance, "missing_attachment", np.random.default_rng(0))
    assert attachment is not None
    for row, col in attachment.attachment_cells:
        assert f"slot ({row}, {col}) must" not in attachment.instance.task_instruction


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_approval_marker__in_a_solvable_task_the_tool_may_be_out_while_the_truth_needs_no_approval(domain: str) -> None:
    """The approval kinds' evidence (the tool in outage or not offered) marks solvable tasks too,
    and there the truth, a completion, holds no item the policy covers."""
    approvals = set()
    for seed in SEEDS:
        instance = tiny_instance(domain, seed)
        for draw in range(3):
            task = add_markers(None, instance, np.random.default_rng(draw), rate=1.0)
            assert task.solvable and task.approval_rule is not None
            approvals.add(task.approval)
            if task.approval_impossible:
                assert False in _covered_in_every_completion(task.instance, task.approval_rule)
    assert approvals == {"outage", "missing"}


def test_check_certificate__rejects_a_variant_whose_claim_is_false() -> None:
    instance = tiny_instance("meal", 0)
    variant = make_variant(instance, "conflicting_constraints", np.random.default_rng(0))
    assert variant is not None
    original = variant.__class__(variant.kind, instance, variant.certificate)
    assert not check_certificate(original)
    outage = make_variant(instance, "tool_outage", np.random.default_rng(0))
    assert outage is not None and outage.approval_rule is not None
    attribute, _ = outage.approval_rule
    loose = (attribute, 10**6)  # covers nothing: the truth needs no approval
    text = outage.instance.task_instruction.replace(approval_policy(outage.approval_rule), approval_policy(loose))
    served = outage.instance.model_copy(update={"task_instruction": text})
    claim = {**outage.certificate, "threshold": loose[1]}
    assert check_certificate(outage)
    assert not check_certificate(dataclasses.replace(outage, instance=served, certificate=claim, approval_rule=loose))
    ambiguous = make_variant(instance, "missing_attachment", np.random.default_rng(0))
    if ambiguous is not None:
        assert not check_certificate(ambiguous.__class__(ambiguous.kind, instance, ambiguous.certificate))


def test_make_variant__unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown unsolvable kind"):
        make_variant(tiny_instance("course", 0), "impossible", np.random.default_rng(0))

"""Distractor and replacement names: never a real tool name, never contained in one, never an
affix variant, drawn reproducibly."""

from __future__ import annotations

import numpy as np
import pytest

from ace_gym.domains import DOMAIN_NAMES, get_domain
from ace_gym.planning.knowledge import real_tool_kinds
from ace_gym.planning.vocabulary import (
    clashes,
    distractor_capacity,
    draw_distractors,
    is_variant_name,
    renamed_parameters,
    replacement_name,
)


@pytest.mark.parametrize("style", ["related", "unrelated"])
@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_draw_distractors__distinct_names_that_never_clash_with_real_tools(domain: str, style: str) -> None:
    real = list(real_tool_kinds(domain))
    for seed in range(20):
        drawn = draw_distractors(get_domain(domain), 10, style, real, np.random.default_rng(seed))
        names = [d.name for d in drawn]
        assert len(set(names)) == 10
        assert not any(clashes(name, real) for name in names)
        assert not any(clashes(name, [other for other in names if other != name]) for name in names)
    again = draw_distractors(get_domain(domain), 10, style, real, np.random.default_rng(3))
    assert again == draw_distractors(get_domain(domain), 10, style, real, np.random.default_rng(3))


def test_draw_distractors__asking_for_more_than_the_vocabulary_holds_is_refused() -> None:
    course = get_domain("course")
    capacity = distractor_capacity(course, "unrelated")
    with pytest.raises(ValueError, match="distractor names are available"):
        draw_distractors(course, capacity + 1, "unrelated", [], np.random.default_rng(0))


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_replacement_name__a_synonym_for_every_word_never_a_variant(domain: str) -> None:
    names = list(real_tool_kinds(domain))
    for original in names:
        for seed in range(10):
            name = replacement_name(original, get_domain(domain), names, np.random.default_rng(seed))
            assert not clashes(name, names) and not is_variant_name(original, name)
            kept = set(get_domain(domain).tool_noun.split("_"))
            assert not (set(name.split("_")) & set(original.split("_"))) - kept


def test_is_variant_name__catches_affix_variants() -> None:
    for variant in ("query_v2", "new_query", "query_alt", "query_new", "legacy_query_2", "query"):
        assert is_variant_name("query", variant)
    assert not is_variant_name("query_course_candidate_from_attribute", "search_course_option_by_property")


def test_renamed_parameters__every_parameter_gets_a_new_distinct_name() -> None:
    renamed = renamed_parameters(("row", "col", "field", "operator", "value"), np.random.default_rng(0))
    assert sorted(renamed.values()) == ["col", "field", "operator", "row", "value"]
    assert not set(renamed) & set(renamed.values())

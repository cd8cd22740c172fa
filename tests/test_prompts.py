"""The texts a model sees, as :mod:`ace_gym.prompts` renders them from kept pieces."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from ace_gym import prompts
from ace_gym.domains import DOMAIN_NAMES, get_domain

SETTINGS = list(itertools.product((False, True), (None, 0, 1, 7), (1, 5), (2, 5)))


def _fresh(domain: prompts.Domain, instruction: str, settings: tuple[bool, int | None, int, int]) -> str:
    """The system prompt rendered from scratch, no piece of it kept."""
    return prompts._system_prompt_head(domain, *settings) + instruction + prompts._SYSTEM_PROMPT_TAIL


def _render(domain: prompts.Domain, instruction: str, settings: tuple[bool, int | None, int, int]) -> str:
    limited, budget, ids, fields = settings
    return prompts.render_system_prompt(
        domain,
        instruction,
        query_budget_limited=limited,
        global_check_budget=budget,
        max_query_ids=ids,
        max_query_fields=fields,
    )


@pytest.mark.parametrize("domain_name", DOMAIN_NAMES)
def test_system_prompt__kept_head_gives_the_prompt_rendered_from_scratch(domain_name: str) -> None:
    domain = get_domain(domain_name)
    # the same domain under another intro is another head, however the two are kept
    twin = dataclasses.replace(domain, intro=domain.intro + " (variant)")
    cases = [(d, s) for d in (domain, twin) for s in SETTINGS]
    prompts._SYSTEM_PROMPT_HEADS.clear()
    for order in (cases, cases[::-1]):  # built, then read back in the other order
        for k, (d, settings) in enumerate(order):
            instruction = f"policy {k}"
            assert _render(d, instruction, settings) == _fresh(d, instruction, settings), settings
    assert len(prompts._SYSTEM_PROMPT_HEADS) == len(cases)


def test_system_prompt__heads_beyond_the_limit_are_rendered_each_time(monkeypatch: pytest.MonkeyPatch) -> None:
    domain = get_domain("course")
    monkeypatch.setattr(prompts, "_SYSTEM_PROMPT_HEADS", {})
    monkeypatch.setattr(prompts, "HEADS_KEPT", 2)
    for settings in SETTINGS:
        assert _render(domain, "policy", settings) == _fresh(domain, "policy", settings)
    assert len(prompts._SYSTEM_PROMPT_HEADS) == 2

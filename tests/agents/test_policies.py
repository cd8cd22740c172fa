"""Policies by name: one spelling for the command line, examples and records."""

from __future__ import annotations

import sys
import types

import pytest

from ace_gym.agents import ExactSolver, GreedyLocal, RandomPolicy, is_engine_spec, policy_name
from ace_gym.errors import ConfigError
from ace_gym.policies import make_policy, policy_label


@pytest.mark.parametrize(("spec", "kind"), [("solver", ExactSolver), ("greedy", GreedyLocal), ("random", RandomPolicy)])
def test_make_policy__builds_the_scripted_policy_of_its_name(spec: str, kind: type) -> None:
    policy = make_policy(spec)
    assert type(policy) is kind and policy_name(policy) == spec == policy_label(spec)


def test_make_policy__passes_engine_specs_and_options_to_make_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    made = []
    fake = types.ModuleType("ace_gym.agents.llm")
    fake.make_engine = lambda spec, **options: made.append((spec, options)) or "engine"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ace_gym.agents.llm", fake)
    assert make_policy("openai:m@http://h:1/v1", temperature=0.5) == "engine"
    assert made == [("openai:m@http://h:1/v1", {"temperature": 0.5})]


def test_make_policy__a_missing_back_end_is_a_config_error_with_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "ace_gym.agents.llm", None)  # import fails as if not installed
    with pytest.raises(ConfigError, match=r"pip install '\.\[hf\]' in an ace-gym checkout"):
        make_policy("hf:/models/tiny")


@pytest.mark.parametrize("spec", ["solvr", "gpt4", "vllm:", "llama:/models/x", ""])
def test_make_policy__refuses_specs_of_no_known_shape(spec: str) -> None:
    with pytest.raises(ConfigError) as raised:
        make_policy(spec)
    assert raised.value.field == "policy"
    if spec == "solvr":
        assert "did you mean 'solver'" in str(raised.value)


def test_policy_label__names_engine_options_sorted_and_refuses_them_for_scripted_policies() -> None:
    assert policy_label("hf:/m", {"top_p": 0.9, "temperature": 0}) == 'hf:/m {"temperature": 0, "top_p": 0.9}'
    assert policy_label("hf:/m", {}) == "hf:/m"
    with pytest.raises(ConfigError, match="LLM policies only"):
        policy_label("solver", {"temperature": 0})


def test_is_engine_spec__needs_a_known_kind_and_a_target() -> None:
    assert [is_engine_spec(s) for s in ("vllm:/m", "hf:m", "openai:m@u", "openai:", "solver", "x:y")] == [
        True,
        True,
        True,
        False,
        False,
        False,
    ]

"""The README's "Train with…" recipes hold a whole solved episode: each recipe's limits (keyword
arguments and CLI overrides read from its code block) are checked against ``ace-gym tokens``
measurements of the very episodes the recipe builds (its ``specs``, played by the reference
policy: ``FIT["policy"]`` when the specs carry FIT's settings, else the solver), token limits with
:data:`MARGIN` over the estimate (it runs about 20-25% below a real tokenizer)."""

from __future__ import annotations

import ast
import dataclasses
import itertools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ace_gym.eval import EpisodeSpec
from ace_gym.eval.fit import FIT, TRAINING_DATASET
from ace_gym.eval.tokens import TokenEpisode, measure, token_rows
from ace_gym.runs.tokens import ApproxTokenizer
from ace_gym.stacks import StackSpec

README = Path(__file__).resolve().parents[2] / "README.md"
MARGIN = 1.5
"""Token limits must be at least this times the estimated longest episode."""
REQUIRED = {
    "TRL `environment_factory`": {"max_completion_length", "max_tool_calling_iterations"},
    "TRL `rollout_func`": {"max_completion_length", "max_turns"},
    "SkyRL": {
        "max_turns",
        "generator.max_turns",
        "generator.max_input_length",
        "generator.sampling_params.max_generate_length",
    },
    "OpenRLHF": {"max_turns", "--data.max_len"},
    "verl": {"max_turns", "data.max_prompt_length", "data.max_response_length"},
}
"""The limits each recipe must set (a recipe that drops one fails). SkyRL's are its own config
names (``GeneratorConfig.max_turns``, ``GeneratorConfig.max_input_length``,
``SamplingParams.max_generate_length`` in ``skyrl/train/config/config.py``, checked at tag
``skyrl-v0.3.0`` and in skyrl-train 0.4.0's ``ppo_base_config.yaml``): a misspelt one is missing."""
KEYWORD_LIMITS = ("max_completion_length", "max_tool_calling_iterations", "max_turns")


@dataclasses.dataclass
class Recipe:
    """One recipe: its heading, the limits it sets (every value each name is given) and the
    episodes it trains on (with the tool failure rate its trainer plays them at)."""

    heading: str
    limits: dict[str, list[int]]
    specs: list[EpisodeSpec]


def train_section(text: str) -> str:
    return text.split("## Train with…")[1].split("\n## ")[0]


def recipes(text: str) -> dict[str, Recipe]:
    """Every ``###`` recipe of the README ``text``'s "Train with…" section, by heading."""
    found = {}
    for part in re.split(r"^### ", train_section(text), flags=re.M)[1:]:
        heading = part.splitlines()[0].strip()
        code = re.search(r"```python\n(.*?)```", part, flags=re.S).group(1)  # type: ignore[union-attr]
        found[heading] = Recipe(heading, limits_of(code), specs_of(code))
    return found


def limits_of(code: str) -> dict[str, list[int]]:
    """The integer limits ``code`` sets: :data:`KEYWORD_LIMITS` keyword arguments, ``name=N``
    overrides inside strings and ``"--flag", "N"`` pairs of a command list."""
    limits: dict[str, list[int]] = {}
    strings: list[str] = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.keyword) and node.arg in KEYWORD_LIMITS and isinstance(node.value, ast.Constant):
            limits.setdefault(node.arg, []).append(int(node.value.value))
        if isinstance(node, ast.List):
            items = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            for flag, value in itertools.pairwise(items):
                if flag.startswith("--") and value.isdigit():
                    limits.setdefault(flag, []).append(int(value))
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            strings.append(node.value)
    for name, value in re.findall(r"(?:^|\s)([\w.]+)=(\d+)(?=\s|$)", " ".join(strings)):
        limits.setdefault(name, []).append(int(value))
    return limits


def specs_of(code: str) -> list[EpisodeSpec]:
    """The episodes the recipe trains on: its imports and its ``domains``/``specs`` assignments
    run as written, each spec at the ``tool_failure_rate`` its ``environment_factory`` sets and
    without a turn limit (the recipe's own is one of the limits checked)."""
    tree = ast.parse(code)
    kept = [
        node
        for node in tree.body
        if (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ace_gym.eval"))
        or (
            isinstance(node, ast.Assign)
            and {t.id for t in node.targets if isinstance(t, ast.Name)} & {"domains", "specs"}
        )
    ]
    namespace: dict[str, Any] = {}
    exec(compile(ast.Module(body=kept, type_ignores=[]), str(README), "exec"), namespace)
    rate = re.search(r"tool_failure_rate=([\d.]+)", code)
    return [played(spec, None if rate is None else float(rate.group(1))) for spec in namespace["specs"]]


def played(spec: EpisodeSpec, rate: float | None) -> EpisodeSpec:
    """``spec`` without its turn limit (which is checked) and at the failure ``rate`` (None: its own)."""
    wrappers = {**dict(spec.stack.wrappers), "step_budget": {}}
    if rate is not None and (rate > 0 or "failure_injection" in wrappers):
        wrappers["failure_injection"] = {**wrappers.get("failure_injection", {}), "rate": rate}
    stack = StackSpec.of(spec.stack.env_id, spec.stack.env_kwargs, wrappers.items())
    return dataclasses.replace(spec, stack=stack)


def reference_policy(specs: Sequence[EpisodeSpec]) -> str:
    fit = all(spec.stack.env_kwargs.items() >= FIT["env_kwargs"].items() for spec in specs)
    return FIT["policy"] if fit else "solver"


_MEASURED: dict[str, dict[str, Any]] = {}


def longest(specs: Sequence[EpisodeSpec]) -> dict[str, Any]:
    """The ``ace-gym tokens`` maxima over ``specs`` played by their reference policy (estimate):
    ``prompt``, ``response``, ``model``, ``total`` tokens and ``turns``, and the lowest ``score``."""
    key = repr(list(specs))
    if key not in _MEASURED:
        episodes = [TokenEpisode(s.stack, s.seed, s.reset_options(), s.policy_seed()) for s in specs]
        played = list(measure(episodes, reference_policy(specs), ApproxTokenizer()))
        rows = [row for row in token_rows(played) if row["domain"] != "all"]
        _MEASURED[key] = {
            "prompt": max(row["prompt_tokens"]["max"] for row in rows),
            "response": max(row["response_tokens"]["max"] for row in rows),
            "model": max(row["model_tokens"]["max"] for row in rows),
            "total": max(e["prompt_tokens"] + e["response_tokens"] for e in played),
            "turns": max(row["turns"]["max"] for row in rows),
            "score": min(e["score"] for e in played),
            "hidden_slots": sorted({e["hidden_slots"] for e in played}),
        }
    return _MEASURED[key]


NEEDS = {
    "max_turns": ("turns", 1.0),
    "max_tool_calling_iterations": ("turns", 1.0),
    "generator.max_turns": ("turns", 1.0),
    "max_completion_length": ("response", MARGIN),
    "data.max_response_length": ("response", MARGIN),
    "data.max_prompt_length": ("prompt", MARGIN),
    "generator.max_input_length": ("total", MARGIN),
    "--data.max_len": ("total", MARGIN),
    "generator.sampling_params.max_generate_length": ("model", MARGIN),
}
"""What each limit must hold: a measured maximum and the factor over it."""


def violations(recipe: Recipe, measured: Mapping[str, Any]) -> list[str]:
    """Each way ``recipe`` fails to hold its longest solved episode (empty: it holds)."""
    found = [f"{recipe.heading}: sets no {name}" for name in sorted(REQUIRED[recipe.heading] - recipe.limits.keys())]
    if measured["score"] < 1.0:
        found.append(f"{recipe.heading}: the reference policy does not solve every episode (min {measured['score']})")
    for name, values in recipe.limits.items():
        measure_name, factor = NEEDS[name]
        need = measured[measure_name] * factor
        found += [f"{recipe.heading}: {name}={v} < {need:g} ({factor}x {measure_name})" for v in values if v < need]
    return found


TEXT = README.read_text(encoding="utf-8")
RECIPES = recipes(TEXT)


def test_readme__every_train_recipe_is_parsed_with_its_limits_and_episodes() -> None:
    assert set(RECIPES) == set(REQUIRED)
    for recipe in RECIPES.values():
        assert recipe.specs and recipe.limits


@pytest.mark.parametrize("heading", sorted(REQUIRED))
def test_recipe__limits_hold_the_longest_solved_episode_of_its_data(heading: str) -> None:
    recipe = RECIPES[heading]
    measured = longest(recipe.specs)
    assert measured["hidden_slots"] == [1, 5, 7, 11, 15, 21]  # every H of the 5x7 set, as the README says
    assert violations(recipe, measured) == []


@pytest.mark.parametrize(
    ("old", "new", "heading"),
    [
        ("data.max_response_length=40960", "data.max_response_length=30000", "verl"),  # above the estimate, under 1.5x
        ("data.max_prompt_length=6144", "data.max_prompt_length=512", "verl"),  # verl's default
        ("max_tool_calling_iterations=16", "max_tool_calling_iterations=8", "TRL `environment_factory`"),
        ('"--data.max_len", "45056"', '"--data.max_len", "2048"', "OpenRLHF"),
        (
            "generator.sampling_params.max_generate_length=10240",
            "generator.sampling_params.max_generate_length=1024",
            "SkyRL",
        ),
    ],
)
def test_violations__a_recipe_limit_lowered_below_the_longest_episode_fails(old: str, new: str, heading: str) -> None:
    section = train_section(TEXT)
    assert section.count(old) == 1
    mutated = recipes(TEXT.replace(section, section.replace(old, new)))[heading]
    assert violations(mutated, longest(mutated.specs)) != []
    assert violations(RECIPES[heading], longest(RECIPES[heading].specs)) == []


def test_violations__a_recipe_that_drops_a_limit_or_trains_one_call_per_turn_fails() -> None:
    section = train_section(TEXT)
    dropped = section.replace(" data.max_prompt_length=6144", "")
    assert violations(recipes(TEXT.replace(section, dropped))["verl"], longest(RECIPES["verl"].specs))
    default = section.replace(
        'fit_spec(EpisodeSpec.of(domain, "5x7", instance_index=i, seed=i, max_turns=8))',
        'EpisodeSpec.of(domain, "5x7", instance_index=i, seed=i, max_turns=8)',
    )
    unfit = recipes(TEXT.replace(section, default))["verl"]
    assert reference_policy(unfit.specs) == "solver"
    assert any("max_turns=8 <" in v for v in violations(unfit, longest(unfit.specs)))


@pytest.mark.parametrize("heading", sorted(REQUIRED))
def test_recipe__trains_on_data_without_the_name_tell(heading: str) -> None:
    """Issue 38: no recipe trains on the published 5x5 names (the truth has its cell's smallest
    name number); each trains on the bundled 5x7 set, and the TRL factory plays it too."""
    recipe = RECIPES[heading]
    assert {spec.dataset for spec in recipe.specs} == {TRAINING_DATASET}
    part = re.split(r"^### ", train_section(TEXT), flags=re.M)[1:]
    code = next(p for p in part if p.startswith(heading))
    if "environment_factory(" in code:
        assert f'dataset="{TRAINING_DATASET}"' in code.split("environment_factory(")[-1].split(")")[0]

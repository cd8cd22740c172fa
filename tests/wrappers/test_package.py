"""What every wrapper promises (the pattern of the ``ace_gym.wrappers`` docstring): it records its
constructor arguments so ``env.spec`` rebuilds the stack, it is typed, and it uses only public
methods of the env and of other wrappers."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.envs.registration import EnvSpec

import ace_gym.wrappers
from ace_gym.envs import AceEnv
from ace_gym.planning import BrokenTool, CostAnnotatedTools, ExtraneousTools, Refine, UnsolvableMix
from ace_gym.wrappers import ChatAdapter, Curriculum, StepBudget, ToolFailureInjection

WRAPPER_CLASSES = [
    obj
    for name in ace_gym.wrappers.__all__
    if inspect.isclass(obj := getattr(ace_gym.wrappers, name)) and issubclass(obj, gym.Wrapper)
]
WRAPPER_MODULES = sorted((Path(ace_gym.wrappers.__file__).parent).glob("*.py"))
CORE_API_FOR_WRAPPERS = {"score", "grid", "budgets", "compiled"}
"""AceEnv's public methods a wrapper may use through ``env.unwrapped`` (or ``get_wrapper_attr``)."""
NAMED_TUPLE_API = {"_asdict", "_replace", "_fields", "_make"}

TOOL_CALLS: list[Any] = [
    {"name": "get_current_grid_state", "arguments": {}},
    {"name": "get_slot_id", "arguments": {"row": 0, "col": 0}},
    {"name": "set_slot", "arguments": {"row": 0, "col": 1, "id": "nope"}},
    {"name": "get_global_check_budget", "arguments": {}},
] * 3
TURNS: list[Any] = [
    '<tool_call>{"name": "get_current_grid_state", "arguments": {}}</tool_call>',
    "no call at all",
    '<tool_call>{"name": "get_slot_id", "arguments": {"row": 0, "col": 0}}</tool_call>' * 2,
] * 3

STACKS: dict[str, tuple[Callable[[gym.Env], gym.Env], list[Any]]] = {
    "ToolFailureInjection": (
        lambda env: ToolFailureInjection(env, 0.5, failure_modes=("failed", "timeout")),
        TOOL_CALLS,
    ),
    "StepBudget": (lambda env: StepBudget(env, 5, notice=True), TOOL_CALLS),
    "ChatAdapter": (lambda env: ChatAdapter(env, "hermes"), TURNS),
    "ChatAdapter(max_turns)": (lambda env: ChatAdapter(env, max_turns=4, notice=True), TURNS),
    "StepBudget(ChatAdapter(ToolFailureInjection))": (
        lambda env: StepBudget(ChatAdapter(ToolFailureInjection(env, 0.3, rng="python")), 6, notice=True),
        TURNS,
    ),
    "planning settings (APB)": (
        lambda env: ChatAdapter(
            Refine(
                BrokenTool(
                    UnsolvableMix(
                        ExtraneousTools(CostAnnotatedTools(env, lam=0.1), n=2, behaviour="misleading"),
                        p_unsolvable=0.5,
                    ),
                    target="global_check",
                ),
                critic="rules",
            )
        ),
        TURNS,
    ),
    # a curriculum needs a procedural env: it brings its own (a small grid, one level per episode)
    "Curriculum(StepBudget(ChatAdapter(procedural)))": (
        lambda env: Curriculum(
            StepBudget(
                ChatAdapter(gym.make("ACE-travel-procedural-v0", rows=3, cols=4, hidden_slots=[2], decoy_budget=[1])), 6
            ),
            levels=[[2, 1], [3, 2]],
            window=1,
        ),
        TURNS,
    ),
}


def _layers(env: gym.Env) -> list[tuple[str, dict[str, Any] | None]]:
    layers = []
    while isinstance(env, gym.Wrapper):
        layers.append((type(env).__name__, getattr(env, "_saved_kwargs", None)))
        env = env.env
    return layers


def _episode(env: gym.Env, actions: list[Any]) -> list[Any]:
    """Everything a seeded episode returns (info views listed, so they compare as lists)."""
    observation, info = env.reset(seed=3)
    steps: list[Any] = [(observation, {k: list(v) if k == "messages" else v for k, v in info.items()})]
    for action in actions:
        observation, reward, terminated, truncated, info = env.step(action)
        steps.append(
            (
                observation,
                reward,
                terminated,
                truncated,
                {k: list(v) if k == "messages" else v for k, v in info.items()},
            )
        )
        if terminated or truncated:
            break
    return steps


@pytest.mark.parametrize("stack", list(STACKS))
def test_spec__make_from_the_spec_rebuilds_the_stack_and_replays_the_episode(stack: str) -> None:
    wrap, actions = STACKS[stack]
    env = wrap(gym.make("ACE-travel-v0", max_steps=200))
    rebuilt = gym.make(env.spec)
    from_json = gym.make(EnvSpec.from_json(env.spec.to_json()))  # the spec is plain data too
    assert _layers(rebuilt) == _layers(env)
    expected = _episode(env, actions)
    assert _episode(rebuilt, actions) == expected
    assert _episode(from_json, actions) == expected


@pytest.mark.parametrize("wrapper", WRAPPER_CLASSES, ids=lambda c: c.__name__)
def test_wrapper__records_its_constructor_arguments_and_types_its_generics(wrapper: type[gym.Wrapper]) -> None:
    assert issubclass(wrapper, gym.utils.RecordConstructorArgs)
    source = inspect.getsource(wrapper.__init__)
    assert source.index("RecordConstructorArgs.__init__") < source.index("Wrapper.__init__")  # recorded first
    parameters = [p for p in inspect.signature(wrapper.__init__).parameters if p not in ("self", "env")]
    recorded = f"RecordConstructorArgs.__init__(self,{','.join(f'{p}={p}' for p in parameters)}"
    assert recorded in "".join(source.split())  # every argument as given, in order (line breaks aside)
    bases = [b for b in getattr(wrapper, "__orig_bases__", ()) if getattr(b, "__origin__", None) is gym.Wrapper]
    assert bases and len(bases[0].__args__) == 4  # gym.Wrapper[WrapperObs, WrapperAct, Obs, Act]


def _attribute_reads(path: Path) -> tuple[list[tuple[int, str, str]], set[str]]:
    """(line, object expression, attribute) of every attribute read in the module, plus
    ``getattr(obj, "<name>")`` with a constant name; and the names bound to the core env (any
    assignment whose value mentions ``.unwrapped``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [
        (node.lineno, ast.unparse(node.value), node.attr) for node in ast.walk(tree) if isinstance(node, ast.Attribute)
    ]
    core_names = {"env.unwrapped", "self.env.unwrapped", "self.unwrapped"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                found.append((node.lineno, ast.unparse(node.args[0]), node.args[1].value))
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value and ".unwrapped" in ast.unparse(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            core_names.update(ast.unparse(target) for target in targets)
    return found, core_names


@pytest.mark.parametrize("path", WRAPPER_MODULES, ids=lambda p: p.name)
def test_wrappers__read_no_private_state_of_other_objects_nor_core_internals(path: Path) -> None:
    problems = []
    reads, core_names = _attribute_reads(path)
    for line, owner, attribute in reads:
        private = attribute.startswith("_") and not attribute.startswith("__") and attribute not in NAMED_TUPLE_API
        if private and owner not in ("self", "cls"):
            problems.append(f"{path.name}:{line}: {owner}.{attribute} reads another object's private state")
        if owner in core_names and attribute not in CORE_API_FOR_WRAPPERS:
            problems.append(f"{path.name}:{line}: {owner}.{attribute} reaches into the core env")
    assert problems == []


def test_wrappers__core_api_they_may_use_is_public_on_ace_env() -> None:
    assert all(not name.startswith("_") and hasattr(AceEnv, name) for name in CORE_API_FOR_WRAPPERS)

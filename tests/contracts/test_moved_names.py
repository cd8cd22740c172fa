"""Modules and names that moved (issue 28's benchmark homes) stay importable under their old
names for one release, with a DeprecationWarning naming the new home; nothing in ace_gym, the
tests, benchmarks or examples uses an old name."""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
import warnings
from pathlib import Path

import pytest

import ace_gym
from ace_gym.wrappers import MOVED

ROOT = Path(ace_gym.__file__).resolve().parents[1]
SOURCES = sorted(
    path
    for folder in ("ace_gym", "tests", "benchmarks", "examples")
    for path in (ROOT / folder).rglob("*.py")
    if path.name != "test_moved_names.py"
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _shims() -> dict[str, str]:
    """Old module name -> new module name, for every module in ace_gym that defines ``__moved_to__``."""
    found = {}
    for path in (ROOT / "ace_gym").rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__moved_to__" for t in node.targets):
                found[_module_name(path)] = ast.literal_eval(node.value)
    return found


SHIMS = _shims()


def test_there_are_moved_modules_to_check() -> None:
    assert "ace_gym.wrappers.unsolvable_mix" in SHIMS
    assert SHIMS["ace_gym.eval.agency"] == "ace_gym.feedback.evaluation"


@pytest.mark.parametrize("old", sorted(SHIMS))
def test_a_moved_module__is_importable_by_its_old_name_with_a_deprecation_warning(old: str) -> None:
    new = importlib.import_module(SHIMS[old])
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=SHIMS[old].replace(".", r"\.")):
        module = importlib.import_module(old)
    public = [name for name in vars(new) if not name.startswith("_")]
    assert public and all(getattr(module, name) is getattr(new, name) for name in public)


@pytest.mark.parametrize("name", sorted(MOVED))
def test_a_moved_wrapper__is_the_same_class_under_its_old_name_with_a_warning(name: str) -> None:
    with pytest.warns(DeprecationWarning, match=MOVED[name].replace(".", r"\.")):
        old = getattr(ace_gym.wrappers, name)
    assert old is getattr(importlib.import_module(MOVED[name]), name)


def test_nothing_in_the_repository_imports_an_old_name() -> None:
    found = []
    for path in SOURCES:
        if _module_name(path) in SHIMS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
                if node.module == "ace_gym.wrappers":
                    modules += [f"ace_gym.wrappers:{a.name}" for a in node.names if a.name in MOVED]
            else:
                continue
            found += [f"{path.relative_to(ROOT)}:{node.lineno} {m}" for m in modules if m in SHIMS or ":" in m]
    assert found == []


def test_importing_every_module__warns_of_no_moved_name() -> None:
    with warnings.catch_warnings():
        warnings.filterwarnings("error", r".* moved to ace_gym\.", DeprecationWarning)
        for path in sorted((ROOT / "ace_gym").rglob("*.py")):
            name = _module_name(path)
            if name not in SHIMS and "__main__" not in name:
                try:
                    importlib.import_module(name)
                except ImportError as error:  # an optional extra this machine lacks
                    if not isinstance(error, ModuleNotFoundError) or (error.name or "").startswith("ace_gym"):
                        raise


def _star_import(module: str) -> dict[str, object]:
    namespace: dict[str, object] = {}
    exec(f"from {module} import *", namespace)  # the statement under test
    return {name: value for name, value in namespace.items() if name not in ("__builtins__", "__warningregistry__")}


@pytest.mark.parametrize("old", sorted(SHIMS))
def test_a_moved_module__star_import_binds_what_its_home_exports(old: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        found = _star_import(old)
    assert found == _star_import(SHIMS[old])
    assert found and "moved_module" not in found


STAR_EXPORTS_AT_7123F6B = {
    "ace_gym.wrappers": {
        "FAILURE_ENVELOPES", "AssistantTurn", "BrokenTool", "ChatAdapter", "ChatMessages", "CostAnnotatedTools",
        "Curriculum", "ExtraneousTools", "FeedbackRounds", "Refine", "StepBudget", "ToolFailureInjection",
        "TurnLimit", "UnsolvableMix",
    },
    "ace_gym.agents": {
        "DONE", "POLICY_SPECS", "SCRIPTED_POLICIES", "ChatEngine", "Completion", "ExactSolver", "GreedyLocal",
        "GreedyRevise", "Policy", "RandomPolicy", "Script", "ScriptedEpisode", "ScriptedPolicy", "ToolCallDict",
        "check_policy_spec", "is_engine_spec", "make_policy", "make_scripted_policy", "policy_label", "policy_name",
    },
    "ace_gym.agents.policies": {
        "POLICY_SPECS", "SCRIPTED_POLICIES", "check_policy_spec", "is_engine_spec", "make_policy",
        "make_scripted_policy", "policy_label", "policy_name",
    },
}  # fmt: skip
"""Names ``from MODULE import *`` bound at 7123f6b, before the benchmark homes (moved ones included)."""


@pytest.mark.parametrize("module", sorted(STAR_EXPORTS_AT_7123F6B))
def test_a_package_with_moved_names__star_import_still_binds_them_with_a_warning(module: str) -> None:
    moved = importlib.import_module(module).MOVED
    with pytest.warns(DeprecationWarning, match="moved to"):
        found = _star_import(module)
    assert STAR_EXPORTS_AT_7123F6B[module] <= set(found)
    assert all(found[name] is getattr(importlib.import_module(home), name) for name, home in moved.items())


@pytest.mark.parametrize("module", sorted(STAR_EXPORTS_AT_7123F6B))
def test_a_package_with_moved_names__inspect_getmembers_does_not_warn(module: str) -> None:
    """``dir()`` leaves the moved names out (``__all__`` keeps them for star imports)."""
    package = importlib.import_module(module)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        names = {name for name, _ in inspect.getmembers(package)}
    assert not names & set(package.MOVED) and set(package.MOVED) <= set(package.__all__)

"""The module hooks that re-export names imported on first access (ace_gym.lazy_exports)."""

import importlib
import sys
import types
import warnings
from pathlib import Path

import pytest

import ace_gym
import ace_gym.agents.policies
import ace_gym.policies
from ace_gym.lazy_exports import lazy_exports, moved_to


@pytest.fixture
def modules(monkeypatch: pytest.MonkeyPatch) -> tuple[types.ModuleType, types.ModuleType]:
    """A module ``front`` re-exporting ``Thing`` lazily from module ``home``, not imported yet."""
    home = types.ModuleType("home")
    home.Thing = object()  # type: ignore[attr-defined]
    front = types.ModuleType("front")
    front.__getattr__, front.__dir__ = lazy_exports("front", "home", ["Thing"])  # type: ignore[method-assign]
    monkeypatch.setitem(sys.modules, "front", front)
    return front, home


def test_a_lazy_name_is_imported_on_first_access_and_then_stored(modules, monkeypatch):
    front, home = modules
    assert "Thing" not in vars(front)
    monkeypatch.setitem(sys.modules, "home", home)
    assert front.Thing is home.Thing
    assert vars(front)["Thing"] is home.Thing  # later lookups no longer reach the hook


def test_the_home_module_is_not_imported_before_first_access(modules):
    front, _ = modules
    assert "home" not in sys.modules
    with pytest.raises(ModuleNotFoundError):
        front.Thing  # noqa: B018  # the access imports "home", which is not importable here


def test_other_names_are_attribute_errors_and_dir_lists_the_lazy_ones(modules):
    front, _ = modules
    with pytest.raises(AttributeError, match="module 'front' has no attribute 'Other'"):
        front.Other  # noqa: B018
    assert "Thing" in dir(front)
    assert not hasattr(front, "Other")


# --- Deprecated aliases: moved modules and names stay importable for one release -----------------

MOVED_MODULES = {
    "ace_gym.eval.loop": "ace_gym.runs.loop",
    "ace_gym.eval.results": "ace_gym.runs.results",
    "ace_gym.longbench.tokens": "ace_gym.runs.tokens",
}
"""Modules that moved down to ace_gym.runs (issue 28), by their old names."""

POLICY_TABLE = ace_gym.policies.__all__
"""The policies by name, which moved from ace_gym.agents(.policies) to ace_gym.policies (issue 28)."""


def _shim_modules() -> list[str]:
    root = Path(ace_gym.__file__).resolve().parent
    return sorted(
        ".".join(path.relative_to(root.parent).with_suffix("").parts)
        for path in root.rglob("*.py")
        if "\n__moved_to__ = " in path.read_text(encoding="utf-8")
    )


def test_moved_modules__each_old_name_is_a_deprecated_alias_of_its_home() -> None:
    for old, new in MOVED_MODULES.items():
        with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
            module = importlib.reload(importlib.import_module(old))
        assert module.__moved_to__ == new


@pytest.mark.parametrize("old", _shim_modules())
def test_moved_modules__an_alias_warns_and_serves_every_name_of_its_home(old: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"{old} moved to "):
        module = importlib.reload(importlib.import_module(old))
    home = importlib.import_module(module.__moved_to__)
    public = [name for name in dir(home) if not name.startswith("_")]
    assert public and all(getattr(module, name) is getattr(home, name) for name in public)
    assert set(public) <= set(dir(module))


@pytest.mark.parametrize("old", ["ace_gym.agents", "ace_gym.agents.policies"])
@pytest.mark.parametrize("name", POLICY_TABLE)
def test_moved_names__the_policy_table_is_served_from_its_old_homes_with_a_warning(old: str, name: str) -> None:
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=f"{old}.{name} moved to ace_gym.policies"):
        found = getattr(module, name)
    assert found is getattr(ace_gym.policies, name)
    assert name in module.__all__ and name not in dir(module)  # a star import binds it; getmembers skips it


def test_moved_names__every_name_of_the_table_is_served_from_its_old_homes() -> None:
    assert set(ace_gym.agents.policies.MOVED) == set(POLICY_TABLE)
    assert set(ace_gym.agents.policies.MOVED.values()) == {"ace_gym.policies"}


def test_moved_names__the_helpers_that_stay_in_agents_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ace_gym.agents.policy_name(ace_gym.policies.make_policy("solver")) == "solver"
        assert ace_gym.agents.is_engine_spec("openai:model") and not ace_gym.agents.is_engine_spec("solver")


def test_moved_to__names_the_home_of_each_alias_from_its_source_and_none_otherwise() -> None:
    for old in _shim_modules():
        assert moved_to(old) == importlib.import_module(old).__moved_to__
    for other in (
        "ace_gym.wrappers",
        "ace_gym.eval.rollout",
        "ace_gym.nowhere",
        "ace_gym",
        "json.decoder",
        "ace_gym..x",
    ):
        assert moved_to(other) is None

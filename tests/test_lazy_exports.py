"""The module hooks that re-export names imported on first access (ace_gym.lazy_exports)."""

import sys
import types

import pytest

from ace_gym.errors import ConfigError
from ace_gym.lazy_exports import check_entry_point, lazy_exports, lazy_homes, load_entry_point


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


def test_lazy_homes__imports_each_name_from_its_own_home(monkeypatch):
    first, second = types.ModuleType("first"), types.ModuleType("second")
    first.One, second.Two = object(), object()  # type: ignore[attr-defined]
    front = types.ModuleType("front")
    front.__getattr__, front.__dir__ = lazy_homes("front", {"One": "first", "Two": "second"})  # type: ignore[method-assign]
    for module in (front, first, second):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    assert (front.One, front.Two) == (first.One, second.Two)  # type: ignore[attr-defined]
    assert {"One", "Two"} <= set(dir(front))


def test_load_entry_point__imports_the_module_and_returns_the_attribute():
    assert load_entry_point("ace_gym.errors:ConfigError") is ConfigError
    check_entry_point("field", "ace_gym.errors:ConfigError")
    for bad in ("ace_gym.errors", ":ConfigError", "ace_gym.errors:", None):
        with pytest.raises(ConfigError, match="module:attribute") as caught:
            check_entry_point("field", bad)
        assert caught.value.field == "field"

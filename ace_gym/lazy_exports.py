"""Module attributes imported on first access (PEP 562): a module can re-export a name from a
heavy home module (pydantic's schema models, the numba generator) without importing it; and
entry points (``"module:attribute"``), which the registries (wrappers, benchmarks) load on first use."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ace_gym.errors import ConfigError


def lazy_homes(module: str, homes: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of module ``module`` that import each name of ``homes``
    from the module ``homes`` maps it to, on first access. A name found is stored in the module, so
    later lookups skip the hook and see the same object as ``from home import name``; any other
    name is an AttributeError, as for a plain module."""

    def __getattr__(name: str) -> Any:  # the module hook's own name
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        found = getattr(importlib.import_module(home), name)
        setattr(sys.modules[module], name, found)
        return found

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[module]), *homes})

    return __getattr__, __dir__


def lazy_exports(module: str, home: str, names: Iterable[str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """:func:`lazy_homes` for names that all live in the module ``home``."""
    return lazy_homes(module, dict.fromkeys(names, home))


def check_entry_point(field: str, entry_point: str) -> None:
    """ConfigError naming ``field`` unless ``entry_point`` is ``"module:attribute"``."""
    module, colon, attribute = entry_point.partition(":") if isinstance(entry_point, str) else ("", "", "")
    if not (module and colon and attribute):
        raise ConfigError(field, entry_point, "must be 'module:attribute'")


def load_entry_point(entry_point: str) -> Any:
    """What ``entry_point`` (``"module:attribute"``) names, its module imported on first use."""
    module, _, attribute = entry_point.partition(":")
    return getattr(importlib.import_module(module), attribute)

"""Module attributes imported on first access (PEP 562): a module can re-export a name from a
heavy home module (pydantic's schema models, the numba generator) without importing it."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any


def lazy_exports(module: str, home: str, names: Iterable[str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of module ``module`` that import ``names`` from module
    ``home`` on first access. A name found is stored in the module, so later lookups skip the
    hook and see the same object as ``from home import name``; any other name is an
    AttributeError, as for a plain module."""
    lazy = frozenset(names)

    def __getattr__(name: str) -> Any:  # the module hook's own name
        if name not in lazy:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        found = getattr(importlib.import_module(home), name)
        setattr(sys.modules[module], name, found)
        return found

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[module]), *lazy})

    return __getattr__, __dir__


def moved_module(module: str, home: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of module ``module``, which moved to ``home`` and stays
    importable under its old name for one release: every attribute is looked up in ``home``, and
    ``__all__`` is the names ``from home import *`` binds, so a star import of the old name binds
    them too. Importing the old name warns (DeprecationWarning) once, naming the new one."""
    warnings.warn(f"{module} moved to {home}; the old name goes in the next release", DeprecationWarning, stacklevel=3)

    def __getattr__(name: str) -> Any:  # the module hook's own name
        found = importlib.import_module(home)
        if name == "__all__":
            return star_names(found)
        return getattr(found, name)

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[module]), *dir(importlib.import_module(home))})

    return __getattr__, __dir__


def star_names(module: ModuleType) -> list[str]:
    """The names ``from module import *`` binds: its ``__all__``, else its names without a leading
    underscore."""
    names = getattr(module, "__all__", None)
    return list(names) if names is not None else [name for name in vars(module) if not name.startswith("_")]


def moved_to(module: str) -> str | None:
    """The home of ``module`` if it is a moved-module alias (its source assigns ``__moved_to__`` a
    string, see :func:`moved_module`), else None. Read from the source file without running any
    module: only the top-level package is imported (to find its folder), never ``module`` or a
    package between them."""
    top, *inner = module.split(".")
    if not inner or not all(part.isidentifier() for part in (top, *inner)):
        return None
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    folders = [Path(folder) for folder in (spec.submodule_search_locations or [])] if spec else []
    for part in inner[:-1]:
        folders = [folder / part for folder in folders if (folder / part / "__init__.py").is_file()]
    sources = [folder / f"{inner[-1]}.py" for folder in folders if (folder / f"{inner[-1]}.py").is_file()]
    if not sources:
        return None
    try:
        tree = ast.parse(sources[0].read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and [getattr(target, "id", None) for target in node.targets] == ["__moved_to__"]
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    return None


def lazy_homes(module: str, homes: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """:func:`lazy_exports` for names from several home modules: ``homes`` maps each name to the
    module that holds it."""
    hooks = {
        home: lazy_exports(module, home, [n for n, h in homes.items() if h == home])[0] for home in {*homes.values()}
    }

    def __getattr__(name: str) -> Any:  # the module hook's own name
        if name not in homes:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        return hooks[homes[name]](name)

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[module]), *homes})

    return __getattr__, __dir__


def moved_names(module: str, homes: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of module ``module`` for names that moved out of it:
    ``homes`` maps each to the module that now holds it; looking one up here warns
    (DeprecationWarning), naming that module, and returns the same object. ``__dir__`` leaves the
    moved names out, so ``inspect.getmembers`` and tab completion do not warn (a module keeps
    them in its ``__all__`` for one release, so a star import binds them, with the warning)."""

    def __getattr__(name: str) -> Any:  # the module hook's own name
        if name not in homes:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(
            f"{module}.{name} moved to {homes[name]}; the old name goes in the next release", DeprecationWarning, 2
        )
        return getattr(importlib.import_module(homes[name]), name)

    def __dir__() -> list[str]:
        return sorted(vars(sys.modules[module]))

    return __getattr__, __dir__

"""Run code in a subprocess as if some installed packages were not: what a user without an extra sees."""

from __future__ import annotations

from collections.abc import Iterable


def without_modules(modules: Iterable[str]) -> str:
    """Python source to put before a ``python -c`` script: from then on, importing any of the
    top-level ``modules`` (or anything below them) fails with ModuleNotFoundError, as if they
    were not installed. Defines ``sys`` for the script that follows."""
    return f"""
import importlib.abc, sys

class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {tuple(modules)!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

sys.meta_path.insert(0, Missing())
"""

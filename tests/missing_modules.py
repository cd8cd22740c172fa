"""Run code in a subprocess as if some installed packages were not: what a user without an extra sees."""

from __future__ import annotations

from collections.abc import Iterable


def without_modules(modules: Iterable[str]) -> str:
    """Python source to put before a ``python -c`` script: from then on, the top-level ``modules``
    (and anything below them) are not found, as if they were not installed: importing one raises
    ModuleNotFoundError and ``importlib.util.find_spec`` returns None. Defines ``sys`` for the
    script that follows."""
    return f"""
import sys

class Missing:  # finds what finder finds but the hidden modules; the rest (metadata, caches) is finder's
    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        find = getattr(self.finder, "find_spec", None)
        if name.partition(".")[0] in {tuple(modules)!r} or find is None:
            return None
        return find(name, path, target)

    def __getattr__(self, name):
        return getattr(self.finder, name)

sys.meta_path[:] = [Missing(finder) for finder in sys.meta_path]
"""


def modules_not_installed_by(extras: Iterable[str]) -> list[str]:
    """The top-level modules installed here that a fresh venv with only ace-gym and ``extras``
    (``pip install -e ".[dev]"``) would lack: those of every installed distribution outside the
    requirements (followed transitively, markers evaluated here) of ace-gym with ``extras``, of
    pip and setuptools (in every venv) and of the pytest plugins (pytest loads them before any
    test). Names that are also top-level files or folders of this repository stay importable."""
    from importlib.metadata import PackageNotFoundError, distribution, distributions, packages_distributions
    from pathlib import Path

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    roots = [("ace-gym", frozenset(extras)), ("pip", frozenset()), ("setuptools", frozenset())]
    roots += [
        (dist.metadata["Name"], frozenset())
        for dist in distributions()
        if any(entry.group == "pytest11" for entry in dist.entry_points)
    ]
    needed: set[str] = set()
    seen: set[tuple[str, frozenset[str]]] = set()
    while roots:
        name, wanted = roots.pop()
        if (canonicalize_name(name), wanted) in seen:
            continue
        seen.add((canonicalize_name(name), wanted))
        try:
            requires = distribution(name).requires or []
        except PackageNotFoundError:
            continue
        needed.add(canonicalize_name(name))
        for text in requires:
            requirement = Requirement(text)
            marker = requirement.marker
            if marker is None or any(marker.evaluate({"extra": extra}) for extra in wanted or {""}):
                roots.append((requirement.name, frozenset(requirement.extras)))
    repository = {path.stem for path in Path(__file__).resolve().parents[1].iterdir()}
    return sorted(
        module
        for module, names in packages_distributions().items()
        if module not in repository and not any(canonicalize_name(name) in needed for name in names)
    )

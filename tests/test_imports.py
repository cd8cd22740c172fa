"""Data flows one way: no import cycle among ace_gym's modules.

Every import statement counts, wherever it stands: at module level, inside a function (a
deferred import is still a dependency) or under ``TYPE_CHECKING``. ``from package import name``
depends on the submodule ``package.name`` when there is one, else on the package itself;
importing ``a.b.c`` is not counted as depending on the packages ``a`` and ``a.b``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import ace_gym

PACKAGE_ROOT = Path(ace_gym.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE_ROOT.rglob("*.py"))}


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The ace_gym modules that module ``name`` (file ``path``) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in modules else base)
    return {module for module in found if module in modules and module != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_one_cycle(graph, component) for component in components]


def _one_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest import path from the component's first module back to itself."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node] & members):
                if target == start:
                    return [*paths[node], start]
                if target not in paths:
                    paths[target] = [*paths[node], target]
                    following.append(target)
        frontier = following
    raise AssertionError(f"{component} is not strongly connected")


def test_imports__ace_gym_has_no_import_cycle() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    cycles = [" -> ".join(cycle) for cycle in _cycles(graph)]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_imports__the_cycle_finder_finds_deferred_and_type_checking_imports(tmp_path: Path) -> None:
    modules = {"ace_gym.a": tmp_path / "a.py", "ace_gym.b": tmp_path / "b.py", "ace_gym.c": tmp_path / "c.py"}
    modules["ace_gym.a"].write_text("from ace_gym import b\n")
    modules["ace_gym.b"].write_text("def f():\n    from ace_gym.c import x\n")
    modules["ace_gym.c"].write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import y\n")
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert graph == {"ace_gym.a": {"ace_gym.b"}, "ace_gym.b": {"ace_gym.c"}, "ace_gym.c": {"ace_gym.a"}}
    assert _cycles(graph) == [["ace_gym.a", "ace_gym.b", "ace_gym.c", "ace_gym.a"]]
    assert _cycles({"ace_gym.a": {"ace_gym.b"}, "ace_gym.b": set()}) == []


def test_imports__only_the_entry_point_imports_the_cli_dispatcher() -> None:
    """``ace_gym.cli`` assembles every command, so a module importing it depends on all of them:
    commands and libraries take the shared flags from ``cli_flags`` and the exit codes from
    ``exit_codes``; only ``python -m ace_gym`` (and the ``ace-gym`` script) runs the dispatcher."""
    modules = _modules()
    importers = sorted(name for name, path in modules.items() if "ace_gym.cli" in _imports(name, path, modules))
    assert importers == ["ace_gym.__main__"]

"""The architecture rules, checked by the linters configured in pyproject.toml and run here, and
the few that no linter checks.

* ``lint-imports`` (``[tool.importlinter]``): the layers of docs/architecture.md, the benchmark
  homes independent, no cycle between sibling packages; every import counts (inside a function,
  under ``TYPE_CHECKING``), and a new package fails until it has a layer.
* ``ruff check`` (``[tool.ruff.lint]``): no ``exec``/``eval``/``compile`` through ``builtins``
  (TID251) or bare ``exec``/``eval`` (S102, S307), no ``print`` in library code (T201).
* Here: a string naming an ace_gym module or entry point (``"ace_gym.x.y:Name"``, loaded at run
  time) points to no higher layer and no other benchmark home; no bare ``compile(``; no module
  over 800 lines.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import ace_gym

try:
    import tomllib
except ImportError:  # Python 3.10: pytest's own dependency
    import tomli as tomllib

PACKAGE = Path(ace_gym.__file__).resolve().parent
REPOSITORY = PACKAGE.parent
IMPORT_CONTRACTS = tomllib.loads((REPOSITORY / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"][
    "contracts"
]
(LAYERS,) = [contract["layers"] for contract in IMPORT_CONTRACTS if contract["type"] == "layers"]
LAYER_OF = {package: rank for rank, layer in enumerate(LAYERS) for package in re.split(r"\s*[:|]\s*", layer)}
"""Package (first component under ace_gym) -> its layer, 0 the highest."""
INDEPENDENT = [set(layer.split(" | ")) for layer in LAYERS if "|" in layer]
MODULE_STRING = re.compile(r"^ace_gym\.(\w+)(?:\.\w+)*(?::[\w.]+)?$")


def _sources() -> dict[str, str]:
    return {path.relative_to(PACKAGE).as_posix(): path.read_text(encoding="utf-8") for path in PACKAGE.rglob("*.py")}


def _package(relative: str) -> str:
    first = relative.split("/")[0]
    return first.removesuffix(".py")


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=REPOSITORY, capture_output=True, text=True, timeout=300, check=False)


def test_lint_imports__every_import_contract_is_kept() -> None:
    done = _run(sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff__no_code_generation_and_no_print_in_the_library() -> None:
    done = _run(sys.executable, "-m", "ruff", "check", "--select", "S102,S307,T201,TID251", "ace_gym")
    assert done.returncode == 0, done.stdout + done.stderr


def test_layers__the_architecture_doc_prints_the_contract_table() -> None:
    doc = (REPOSITORY / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) [^|]*\| (.*) \|$", doc, re.MULTILINE)
    documented = {name: int(rank) for rank, names in rows for name in re.findall(r"`(\w+)`", names)}
    ranks = sorted(set(documented.values()), reverse=True)
    assert {name: ranks.index(rank) for name, rank in documented.items()} == {
        name: rank for name, rank in LAYER_OF.items()
    }


def _named_modules(source: str) -> list[tuple[int, str]]:
    """(line, package) of every string literal of ``source`` naming an ace_gym module or entry
    point (docstrings and other bare string statements left out)."""
    tree = ast.parse(source)
    documentation = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    return [
        (node.lineno, found.group(1))
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in documentation
        if (found := MODULE_STRING.match(node.value))
    ]


def test_named_modules__finds_entry_points_and_module_names_not_prose() -> None:
    source = '"""ace_gym.eval:X in a docstring."""\nx = "ace_gym.eval.cli:main"\ny = ("ace_gym.stacks", "see ace_gym.eval")\n'
    assert _named_modules(source) == [(2, "eval"), (3, "stacks")]


def test_layers__no_string_names_a_module_of_a_higher_layer_or_another_benchmark_home() -> None:
    found = []
    for relative, source in _sources().items():
        importer = _package(relative)
        if importer == "__init__":  # the root package sits above every layer
            continue
        for line, target in _named_modules(source):
            higher = LAYER_OF.get(target, -1) < LAYER_OF[importer]
            across = target != importer and any({importer, target} <= homes for homes in INDEPENDENT)
            if higher or across:
                found.append(f"ace_gym/{relative}:{line}: {importer} names {target}")
    assert not found, found


def test_ace_gym__calls_no_bare_compile() -> None:
    """ruff flags ``exec``, ``eval`` and ``builtins.compile``; no rule flags a bare ``compile(``."""
    found = [
        f"{relative}:{node.lineno}"
        for relative, source in _sources().items()
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "compile"
    ]
    assert not found, found


def test_ace_gym__no_module_exceeds_800_lines() -> None:
    """A module holds one concern (issue 28: ``instance.py`` held four in 1,702 lines)."""
    long = {relative: n for relative, source in _sources().items() if (n := len(source.splitlines())) > 800}
    assert not long, f"modules over 800 lines: {long}"

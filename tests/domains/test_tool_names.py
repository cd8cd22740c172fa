"""The tool-name table: one key per tool, one home for every name, read by every module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ace_gym.domains import DOMAIN_NAMES, get_domain
from ace_gym.tools import TOOL_KEYS, TOOL_NAMES, tool_key, tool_name, tool_names, toolset
from ace_gym.tools.dispatch import TOOL_FUNCTIONS

PACKAGE = Path(__file__).resolve().parents[2] / "ace_gym"
NAME_SUFFIXES = (
    "_candidate_from_attribute",
    "_item_info",
    "_item_attributes",
    "_slot_constraints",
    "_global_constraints",
)
TABLE_MODULES = {PACKAGE / "domains" / "tool_names.py"}


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_tool_names__the_tool_set_is_the_table_in_table_order(domain: str) -> None:
    names = tool_names(domain)
    assert tuple(names) == TOOL_KEYS == tuple(TOOL_FUNCTIONS) == tuple(TOOL_NAMES)
    assert list(names.values()) == list(toolset(get_domain(domain)).names)
    assert all(tool_key(name, domain) == key for key, name in names.items())
    assert tool_name("query", get_domain(domain)) == f"query_{domain}_candidate_from_attribute"


def test_tool_names__unknown_names_and_other_domains_tools_have_no_key() -> None:
    assert tool_key("query_meal_candidate_from_attribute", "course") is None
    assert tool_key("done", "course") == "done" and tool_key("nope", "course") is None
    with pytest.raises(TypeError):
        tool_names("course")["done"] = "finish"  # type: ignore[index]


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """String literals of a module that are not docstrings (f-string parts included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_tool_names__no_module_builds_or_parses_a_domain_tool_name() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in TABLE_MODULES
        for line, text in _code_strings(path)
        if any(suffix in text for suffix in NAME_SUFFIXES)
    ]
    assert found == [], "domain tool names are built from ace_gym.domains.tool_names only:\n" + "\n".join(found)

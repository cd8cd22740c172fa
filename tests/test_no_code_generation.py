"""The library runs the code it ships: no module of ``ace_gym`` generates code at run time
(issue 28: a tool layer a newcomer can read; `grep -rn "exec(\\|compile(" ace_gym` finds none)."""

from __future__ import annotations

import ast
from pathlib import Path

import ace_gym

CODE_GENERATING_BUILTINS = frozenset({"exec", "eval", "compile"})


def code_generating_calls(source: str) -> list[str]:
    """``line: name`` of every call in ``source`` to the builtins ``exec``, ``eval`` or ``compile``,
    by their bare name or through ``builtins`` (``re.compile`` and methods named so are others)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        if isinstance(function, ast.Name) and function.id in CODE_GENERATING_BUILTINS:
            found.append(f"{node.lineno}: {function.id}")
        elif (
            isinstance(function, ast.Attribute)
            and function.attr in CODE_GENERATING_BUILTINS
            and isinstance(function.value, ast.Name)
            and function.value.id in ("builtins", "__builtins__")
        ):
            found.append(f"{node.lineno}: {function.value.id}.{function.attr}")
    return found


def test_code_generating_calls__finds_the_builtins_and_not_re_compile() -> None:
    source = """import re, builtins
exec(compile('x = 1', '<s>', 'exec'))
eval('1')
builtins.exec('2')
re.compile('a')
"""
    assert sorted(code_generating_calls(source)) == ["2: compile", "2: exec", "3: eval", "4: builtins.exec"]


def test_ace_gym__generates_no_code_at_run_time() -> None:
    package = Path(ace_gym.__file__).parent
    found = {
        str(path.relative_to(package)): calls
        for path in sorted(package.rglob("*.py"))
        if (calls := code_generating_calls(path.read_text(encoding="utf-8")))
    }
    assert found == {}

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


MAX_MODULE_LINES = 800


def test_ace_gym__no_module_exceeds_800_lines() -> None:
    """Issue 28: a module holds one concern (``instance.py`` held four in 1,702 lines)."""
    package = Path(ace_gym.__file__).parent
    long = {
        str(path.relative_to(package)): lines
        for path in sorted(package.rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def json_written_by_hand(source: str) -> list[int]:
    """Lines of ``source`` whose string literals (f-string parts included) hold a piece of a JSON
    object written out: an opening ``{"`` or a ``": `` between a key and its value. Docstrings
    (and other bare string statements) are left out."""
    tree = ast.parse(source)
    documentation = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in documentation:
            if '{"' in node.value or '": ' in node.value:
                found.add(node.lineno)
    return sorted(found)


def test_json_written_by_hand__finds_envelope_pieces_and_not_plain_text() -> None:
    source = """head = '{"status": "success", "data": '
row = f'{{"row": {r}}}'
message = f"Slot (row={r}) is fixed"
'The envelope ``{"status": ...}``.'
"""
    assert json_written_by_hand(source) == [1, 2]


HAND_WRITTEN_JSON_ALLOWED: dict[str, tuple[int, str]] = {
    "agents/llm/tiny_model.py": (1, "a tool call in the hermes format, text the tiny test model is trained on"),
    "envs/ace_env.py": (1, "an error message showing the model the shape of a call"),
    "hub.py": (1, "the dataset card's example code"),
    "instance/parquet.py": (
        1,
        "the rows' instance texts spliced unparsed into one document: the dataset validation still sees (and refuses) a repeated key",
    ),
    "longbench/engine.py": (1, "an error message showing the model the shape of the arguments"),
    "longbench/prompts.py": (3, "the prompt describing the tool's result to the model"),
    "longbench/puzzle_env.py": (1, "an error message showing the model the shape of the arguments"),
    "parsing/formats.py": (1, "an error message showing the model the shape of a call"),
    "parsing/turn.py": (4, "FORMAT_EXAMPLES: example calls in each format, shown in prompts"),
    "planning/holistic.py": (2, "the prompt describing the plan and refusal objects to the model"),
    "planning/stepwise.py": (1, "the prompt describing the prediction objects to the model"),
    "server/app.py": (1, "a protocol error message showing the shape of a frame"),
    "server/mcp.py": (1, "a JSON-RPC error message showing the shape of a request"),
    "tools/compact.py": (1, "the system prompt note showing the model a failed compact reply"),
    "wrappers/failure_injection.py": (1, "the 'truncated' failure: an envelope cut short on purpose, no JSON"),
}
"""Files of ace_gym whose string literals hold JSON pieces that are no JSON the library writes:
prose and examples shown to a model, and one reply broken on purpose. By file: how many lines
hold such pieces, and why (a new piece in one of these files changes the count and fails too)."""


def test_ace_gym__writes_json_only_through_an_encoder() -> None:
    """Issue 28: JSON is built as values and serialised by an encoder (``json.dumps``, the tool
    layer's :func:`ace_gym.tools.replies.dumps`), never assembled from hand-written pieces; the
    exceptions are :data:`HAND_WRITTEN_JSON_ALLOWED`."""
    package = Path(ace_gym.__file__).parent
    found = {
        path.relative_to(package).as_posix(): lines
        for path in sorted(package.rglob("*.py"))
        if (lines := json_written_by_hand(path.read_text(encoding="utf-8")))
    }
    unexpected = {
        name: lines for name, lines in found.items() if len(lines) != HAND_WRITTEN_JSON_ALLOWED.get(name, (0, ""))[0]
    }
    assert not unexpected, f"hand-written JSON (file: lines; see HAND_WRITTEN_JSON_ALLOWED): {unexpected}"
    assert set(found) == set(HAND_WRITTEN_JSON_ALLOWED), "an allowed file no longer writes JSON by hand: drop it"

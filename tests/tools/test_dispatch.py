"""The dispatcher's tool table: parameter schemas as pydantic writes them, and how a tool binds its arguments."""

from __future__ import annotations

import inspect
import json
from typing import Any, Literal

import pytest
from pydantic import TypeAdapter

from ace_gym.tools.dispatch import TOOL_FUNCTIONS, Tool, type_schema
from ace_gym.tools.readonly import read_only


def _parameter_types() -> list[Any]:
    hints = [inspect.get_annotations(f, eval_str=True) for f in TOOL_FUNCTIONS.values()]
    return [t for h in hints for name, t in h.items() if name not in ("state", "return")]


@pytest.mark.parametrize("annotation", [*_parameter_types(), float, bool, Literal["a", "b"], list[int]], ids=repr)
def test_type_schema__writes_what_pydantic_writes_key_for_key(annotation: Any) -> None:
    expected = TypeAdapter(annotation).json_schema()
    assert json.dumps(type_schema(annotation)) == json.dumps(expected)


@pytest.mark.parametrize("annotation", [dict[str, int], tuple[int, str], Literal[1, 2], bytes])
def test_type_schema__refuses_a_type_it_cannot_write_exactly(annotation: Any) -> None:
    with pytest.raises(TypeError, match="no JSON schema"):
        type_schema(annotation)


def _tool(function: Any) -> Tool:
    """``function`` as a tool: its parameters after ``state``, those without a default required."""
    parameters = [p for p in inspect.signature(function).parameters.values() if p.name != "state"]
    required = frozenset(p.name for p in parameters if p.default is inspect.Parameter.empty)
    return Tool("done", "tool", function, tuple(p.name for p in parameters), required, read_only({}))


def test_invoke__binds_arguments_by_name_and_lets_a_tool_s_own_key_error_through() -> None:
    def tool(state: Any, row: int, col: int) -> Any:
        if row < 0:
            raise KeyError("a bug inside the tool")
        return (state, row, col)

    invoke = _tool(tool).invoke
    assert invoke("state", {"col": 2, "row": 1, "extra": 3}) == ("state", 1, 2)
    with pytest.raises(KeyError, match="a bug inside the tool"):  # not mistaken for a missing argument
        invoke("state", {"row": -1, "col": 2})
    assert _tool(lambda state: state).invoke("state", {"ignored": 1}) == "state"


def test_invoke__fills_a_left_out_optional_argument_with_its_default() -> None:
    def tool(state: Any, row: int, id: str | None = None, note: str = "n") -> Any:
        return (state, row, id, note)

    invoke = _tool(tool).invoke
    assert invoke("state", {"row": 1}) == ("state", 1, None, "n")
    assert invoke("state", {"note": "x", "row": 1, "id": "a"}) == ("state", 1, "a", "x")


def test_invoke__names_the_required_arguments_left_out_without_calling_the_tool() -> None:
    def tool(state: Any, row: int, col: int, field: str, id: str | None = None) -> Any:
        raise AssertionError("called without its required arguments")

    invoke = _tool(tool).invoke
    reply = invoke("state", {"col": 1, "id": "a"})
    assert not reply.ok
    assert json.loads(reply.text)["messages"] == "Invalid tool arguments, missing required argument(s): row, field"

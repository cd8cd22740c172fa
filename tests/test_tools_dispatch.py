"""The dispatcher's tool table: parameter schemas built without a pydantic validator per parameter."""

from __future__ import annotations

import inspect
import json
from typing import Any, Literal

import pytest
from pydantic import TypeAdapter

from ace_gym.tools.dispatch import TOOL_FUNCTIONS, type_schema


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

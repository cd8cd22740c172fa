"""Text leaving ace-gym: valid UTF-8 strings, clipped reprs for messages, bounded JSON nesting."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ace_gym.text import MAX_JSON_DEPTH, clipped, nested_deeper_than, valid_strings
from tests.core_helpers import nested_dict, nested_list


def test_valid_strings__replaces_lone_surrogates_in_every_string_at_any_depth() -> None:
    value = {"a\ud800": ["x\udfff", {"b": "\U0001f600 ok"}, 1, None], "n": 2.5}
    valid = valid_strings(value)
    assert valid == {"a\ufffd": ["x\ufffd", {"b": "\U0001f600 ok"}, 1, None], "n": 2.5}
    assert json.dumps(valid, ensure_ascii=False).encode("utf-8")  # encodes now
    assert value["a\ud800"][0] == "x\udfff"  # the argument is left as it was
    assert valid_strings("plain") == "plain" and valid_strings(7) == 7 and valid_strings(None) is None


class BrokenRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class SurrogateRepr:
    def __repr__(self) -> str:
        return "<\ud800>"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("abc", "'abc'"),
        ({"a": [1, None]}, "{'a': [1, None]}"),
        ("x" * 100, "'" + "x" * 36 + "..."),
        ("\ud800", "'\\ud800'"),  # a string's repr escapes a lone surrogate
        (SurrogateRepr(), "<\ufffd>"),
        (10**5000, "<16610-bit integer>"),  # past Python's digit limit for str(int)
        (nested_list(), "<list>"),  # repr recurses too deeply
        (nested_dict(), "<dict>"),
        (BrokenRepr(), "<BrokenRepr>"),
    ],
    ids=["str", "dict", "long", "surrogate", "surrogate-repr", "huge-int", "deep-list", "deep-dict", "broken-repr"],
)
def test_clipped__a_short_repr_that_never_raises(value: Any, shown: str) -> None:
    assert clipped(value, 40) == shown
    assert len(clipped(value, 40)) <= 40


def test_nested_deeper_than__counts_container_levels_without_recursing() -> None:
    assert not nested_deeper_than(1) and not nested_deeper_than("[[[")
    assert not nested_deeper_than({"a": [1]}, 2) and nested_deeper_than({"a": [[1]]}, 2)
    assert not nested_deeper_than(nested_dict(MAX_JSON_DEPTH - 1))  # MAX_JSON_DEPTH levels in all
    assert nested_deeper_than(nested_dict(MAX_JSON_DEPTH))
    assert nested_deeper_than(nested_list())  # far past any recursion limit
    assert not nested_deeper_than({"tokens": list(range(100_000)), "messages": [{"content": "x"}]})

"""Text leaving ace-gym: valid UTF-8 strings, bounded JSON nesting."""

from __future__ import annotations

import json

from ace_gym.text import MAX_JSON_DEPTH, nested_deeper_than, valid_strings
from tests.core_helpers import nested_dict, nested_list


def test_valid_strings__replaces_lone_surrogates_in_every_string_at_any_depth() -> None:
    value = {"a\ud800": ["x\udfff", {"b": "\U0001f600 ok"}, 1, None], "n": 2.5}
    valid = valid_strings(value)
    assert valid == {"a\ufffd": ["x\ufffd", {"b": "\U0001f600 ok"}, 1, None], "n": 2.5}
    assert json.dumps(valid, ensure_ascii=False).encode("utf-8")  # encodes now
    assert value["a\ud800"][0] == "x\udfff"  # the argument is left as it was
    assert valid_strings("plain") == "plain" and valid_strings(7) == 7 and valid_strings(None) is None


def test_nested_deeper_than__counts_container_levels_without_recursing() -> None:
    assert not nested_deeper_than(1) and not nested_deeper_than("[[[")
    assert not nested_deeper_than({"a": [1]}, 2) and nested_deeper_than({"a": [[1]]}, 2)
    assert not nested_deeper_than(nested_dict(MAX_JSON_DEPTH - 1))  # MAX_JSON_DEPTH levels in all
    assert nested_deeper_than(nested_dict(MAX_JSON_DEPTH))
    assert nested_deeper_than(nested_list())  # far past any recursion limit
    assert not nested_deeper_than({"tokens": list(range(100_000)), "messages": [{"content": "x"}]})

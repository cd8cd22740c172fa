"""Read-only tool schemas: shared by every episode, impossible to corrupt, still plain JSON to every consumer."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter

from ace_gym.domains import DOMAIN_NAMES, get_domain
from ace_gym.envs import AceEnv
from ace_gym.tools.dispatch import toolset
from ace_gym.tools.readonly import ReadOnlyDict, ReadOnlyList, read_only

SCHEMAS = toolset(get_domain("course")).schemas


def _plain(value: Any) -> Any:
    """``value`` rebuilt from its JSON text: plain dicts and lists only."""
    return json.loads(json.dumps(value))


def _containers(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [value, *(c for v in value.values() for c in _containers(v))]
    if isinstance(value, list):
        return [value, *(c for v in value for c in _containers(v))]
    return []


DICT_CHANGES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "setitem": lambda d: d.__setitem__("type", "x"),
    "delitem": lambda d: d.__delitem__("type"),
    "clear": lambda d: d.clear(),
    "pop": lambda d: d.pop("type"),
    "popitem": lambda d: d.popitem(),
    "setdefault": lambda d: d.setdefault("new", 1),
    "update": lambda d: d.update(new=1),
    "ior": lambda d: d.__ior__({"new": 1}),
}
LIST_CHANGES: dict[str, Callable[[list[Any]], Any]] = {
    "setitem": lambda s: s.__setitem__(0, None),
    "delitem": lambda s: s.__delitem__(0),
    "iadd": lambda s: s.__iadd__([1]),
    "imul": lambda s: s.__imul__(2),
    "append": lambda s: s.append(1),
    "extend": lambda s: s.extend([1]),
    "insert": lambda s: s.insert(0, 1),
    "pop": lambda s: s.pop(),
    "remove": lambda s: s.remove(s[0]),
    "clear": lambda s: s.clear(),
    "sort": lambda s: s.sort(key=id),
    "reverse": lambda s: s.reverse(),
}


@pytest.mark.parametrize("change", DICT_CHANGES.values(), ids=list(DICT_CHANGES))
def test_read_only_dict__refuses_every_change_and_says_to_copy_first(change: Callable[[Any], Any]) -> None:
    schema = SCHEMAS[0]
    before = _plain(schema)
    with pytest.raises(TypeError, match=r"read-only .*copy\.deepcopy"):
        change(schema)
    assert schema == before


@pytest.mark.parametrize("change", LIST_CHANGES.values(), ids=list(LIST_CHANGES))
def test_read_only_list__refuses_every_change_and_says_to_copy_first(change: Callable[[Any], Any]) -> None:
    required = next(s for s in SCHEMAS if s["function"]["parameters"]["required"])["function"]["parameters"]
    for value in (SCHEMAS, required["required"]):
        before = _plain(value)
        with pytest.raises(TypeError, match=r"read-only .*copy\.deepcopy"):
            change(value)
        assert value == before


def test_read_only__init_again_changes_nothing() -> None:
    value = read_only({"a": [1, 2]})
    value.__init__({"b": 3})
    value["a"].__init__([9])
    assert value == {"a": [1, 2]}


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_schemas__are_read_only_at_every_depth(domain: str) -> None:
    schemas = toolset(get_domain(domain)).schemas
    for container in _containers(schemas):
        assert type(container) in (ReadOnlyDict, ReadOnlyList)


def test_deepcopy__gives_plain_mutable_values_equal_to_the_schemas() -> None:
    copied = copy.deepcopy(SCHEMAS)
    assert copied == SCHEMAS and json.dumps(copied) == json.dumps(SCHEMAS)
    assert all(type(c) in (dict, list) for c in _containers(copied))
    copied[0]["function"]["description"] = "changed"
    copied[0]["function"]["parameters"]["required"].append("x")
    assert SCHEMAS[0]["function"]["description"] != "changed"


def test_shallow_copies__are_plain_and_share_the_read_only_children() -> None:
    schema = SCHEMAS[0]
    for shallow in (copy.copy(schema), dict(schema), {**schema}, schema | {}):
        assert type(shallow) is dict and shallow == schema
        assert shallow["function"] is schema["function"]
        shallow["type"] = "changed"
    assert type(copy.copy(SCHEMAS)) is list and type(SCHEMAS[:2]) is list and type(SCHEMAS * 1) is list


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle__round_trips_to_read_only_values(protocol: int) -> None:
    loaded = pickle.loads(pickle.dumps(SCHEMAS, protocol=protocol))
    assert loaded == SCHEMAS and json.dumps(loaded) == json.dumps(SCHEMAS)
    assert [type(c) for c in _containers(loaded)] == [type(c) for c in _containers(SCHEMAS)]


def test_json_and_equality__match_plain_values_byte_for_byte() -> None:
    plain = _plain(SCHEMAS)
    assert SCHEMAS == plain and plain == SCHEMAS and SCHEMAS[0] == plain[0]
    for kwargs in ({}, {"ensure_ascii": False}, {"indent": 2, "sort_keys": True}, {"separators": (",", ":")}):
        assert json.dumps(SCHEMAS, **kwargs) == json.dumps(plain, **kwargs)


def test_orjson__serialises_them_as_plain_values() -> None:
    orjson = pytest.importorskip("orjson")
    assert orjson.dumps(SCHEMAS) == orjson.dumps(_plain(SCHEMAS))


def test_pydantic__validates_and_dumps_them_as_plain_values() -> None:
    class Request(BaseModel):
        tools: list[dict[str, Any]]

    request = Request(tools=SCHEMAS)
    assert request.tools == _plain(SCHEMAS)
    assert request.model_dump_json() == Request(tools=_plain(SCHEMAS)).model_dump_json()
    assert TypeAdapter(list[dict[str, Any]]).dump_json(SCHEMAS) == TypeAdapter(list[dict[str, Any]]).dump_json(
        _plain(SCHEMAS)
    )


def test_chat_template__renders_them_as_it_renders_plain_values() -> None:
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]")))
    tokenizer.chat_template = (
        "{% for tool in tools %}{{ tool | tojson }}\n{{ tool.function.name }}:"
        "{% for name, spec in tool.function.parameters.properties.items() %} {{ name }}={{ spec.type }}"
        "{% endfor %}\n{% endfor %}{% for m in messages %}{{ m.content }}{% endfor %}"
    )
    messages = [{"role": "user", "content": "hi"}]
    shared = tokenizer.apply_chat_template(messages, tools=list(SCHEMAS), tokenize=False)
    assert shared == tokenizer.apply_chat_template(messages, tools=_plain(SCHEMAS), tokenize=False)
    assert "set_slot: row=integer col=integer id=" in shared


def test_openai_client__sends_them_as_plain_json() -> None:
    openai = pytest.importorskip("openai")
    httpx = pytest.importorskip("httpx")
    bodies = []

    def answer(request: Any) -> Any:
        bodies.append(request.content)
        message = {"role": "assistant", "content": "ok"}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return httpx.Response(
            200, json={"id": "1", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}
        )

    client = openai.OpenAI(
        api_key="x", base_url="http://test/v1", http_client=httpx.Client(transport=httpx.MockTransport(answer))
    )
    for tools in (list(SCHEMAS), _plain(SCHEMAS)):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], tools=tools)
    assert bodies[0] == bodies[1] and json.loads(bodies[0])["tools"] == _plain(SCHEMAS)


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_reset__hands_out_a_new_list_of_the_shared_schemas(domain: str) -> None:
    first_env, second_env = AceEnv(domain), AceEnv(domain)
    first = first_env.reset(seed=1)[1]["tools"]
    again = first_env.reset(seed=2)[1]["tools"]
    other = second_env.reset(seed=3)[1]["tools"]
    assert type(first) is list and first is not again
    assert all(a is b is c for a, b, c in zip(first, again, other, strict=True))
    first.append({"type": "function"})  # the list is the caller's: its schemas are not
    assert len(first_env.reset(seed=4)[1]["tools"]) == len(again)

"""Compact replies: the same information as the published envelopes in fewer characters, read
back into the published envelope by :func:`expand_reply`; the default env is unchanged."""

from __future__ import annotations

import json

import pytest

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.policies import make_policy
from ace_gym.tools.compact import COMPACT_NOTE, compact_reply, expand_reply
from ace_gym.tools.replies import ToolReply, invalid, ok_reply


def _played_calls(domain: str, policy: str) -> list[tuple[dict, str]]:
    """(arguments, published reply text) of every call of an episode (full observations)."""
    (record,) = run_episodes([EpisodeSpec.of(domain, instance_index=34)], make_policy(policy))
    arguments = {
        call["id"]: json.loads(call["function"]["arguments"])
        for message in record["messages"]
        for call in message.get("tool_calls", ())
    }
    return [(arguments[m["tool_call_id"]], m["content"]) for m in record["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
@pytest.mark.parametrize("policy", ["solver", "random"])
def test_compact_reply__keeps_every_fact_and_expands_to_the_published_envelope(domain: str, policy: str) -> None:
    played = _played_calls(domain, policy)
    published_total = compact_total = 0
    for arguments, text in played:
        published = json.loads(text)
        compact = compact_reply(ToolReply(text, published["status"] == "success", envelope=published), arguments)
        expanded = expand_reply(json.loads(compact), arguments)
        assert {k: expanded[k] for k in ("status", "messages")} == {k: published[k] for k in ("status", "messages")}
        data, back = published["data"], expanded["data"]
        assert {key: back[key] for key in data} == data, text  # every published fact comes back
        assert set(back) - set(data) <= set(arguments)  # beyond them only the call's own arguments
        published_total, compact_total = published_total + len(text), compact_total + len(compact)
    # the solver's replies are mostly query matches: well under two thirds; a random policy's, mostly refusals
    assert compact_total < (0.6 if policy == "solver" else 1.0) * published_total


def test_compact_reply__a_failure_keeps_its_envelope_minified() -> None:
    refused = invalid("x")
    assert compact_reply(refused, {"row": 1}) == '{"status":"failed","messages":"Invalid tool arguments, x","data":{}}'
    assert expand_reply(json.loads(compact_reply(refused, {})), {"row": 1}) == json.loads(refused.text)
    assert compact_reply(ToolReply("not json", ok=False), {}) == "not json"  # no envelope values: the text as it is


def test_compact_reply__is_written_from_the_reply_values_not_its_text() -> None:
    """The values a tool built its reply from are compacted; the envelope text is never read back."""
    reply = ok_reply({"row": 1, "col": 2, "matches": [{"id": "a", "price": 3}], "remaining_budget": None})
    unreadable = reply._replace(text="<an envelope text nobody parses>")
    assert compact_reply(unreadable, {"row": 1, "col": 2, "field": "price"}) == '{"matches":{"a":3}}'


def test_ace_env__compact_observation_is_opt_in_and_the_default_is_the_published_text() -> None:
    full, compact = AceEnv("meal"), AceEnv("meal", observation="compact")
    (_, full_info), (_, compact_info) = full.reset(seed=0), compact.reset(seed=0)
    assert compact_info["system_prompt"].startswith(full_info["system_prompt"])
    assert COMPACT_NOTE in compact_info["system_prompt"] and COMPACT_NOTE not in full_info["system_prompt"]
    row, col = full_info["hidden_positions"][0]
    action = {
        "name": "query_meal_candidate_from_attribute",
        "arguments": {"row": row, "col": col, "field": "price", "operator": ">=", "value": 0},
    }
    (full_text, *_, full_step_info), compact_text = full.step(action), compact.step(action)[0]
    assert full_text.startswith('{"status": "success", "messages": "Successfully executed tool", "data": {"row": ')
    assert compact_text == compact_reply(full_step_info["reply"], action["arguments"]) and compact_text.startswith(
        '{"matches":{'
    )
    with pytest.raises(ConfigError, match="observation"):
        AceEnv("meal", observation="short")


def test_fit_spec__adds_compact_observations_and_keeps_the_specs_own_settings() -> None:
    from ace_gym.eval.fit import FIT, fit_spec, fit_stack

    spec = fit_spec(EpisodeSpec.of("course", instance_index=3, env_kwargs={"check_include_reason": True}))
    assert spec.stack.env_kwargs == {
        "domain": "course",
        "dataset": "5x5",
        "item_names": "renumbered",
        "check_include_reason": True,
        **FIT["env_kwargs"],
    }
    assert FIT["env_kwargs"]["observation"] == "compact" and FIT["policy"] == "solver-batch"
    assert fit_stack(EpisodeSpec.of("course").stack).env_kwargs["observation"] == "compact"
    (record,) = run_episodes([spec], make_policy(FIT["policy"]))
    assert record["score"] == 1.0 and record["usage"]["turns"] <= 4
    assert COMPACT_NOTE in record["messages"][0]["content"]

"""What a token-exact episode record must satisfy, whichever engine produced it."""

from __future__ import annotations

import math
from typing import Any

from ace_gym.chat_template import ChatTokens, template_message
from ace_gym.parsing import parse_turn


def assert_token_exact(record: dict[str, Any], tokenizer: Any) -> None:
    """The record's token ids are the ids the model saw and wrote, and they decode to its messages.

    * every turn's prompt ids (as the engine reported them) are ``prompt_ids`` plus the response
      up to that turn, and its generated ids and logprobs sit at ``turn_starts[t]``;
    * re-rendering the conversation with the chat template, turn by turn with the generated ids
      (:class:`ChatTokens`), reproduces every turn's prompt ids and the whole trajectory;
    * the opening decodes to the rendered opening messages, each turn's generated ids decode to
      text the adapter reads as that turn's assistant message, each env segment to text holding
      the turn's replies, and only generated ids are in the assistant mask.
    """
    tokens = record["tokens"]
    assert tokens is not None, "no token trajectory"
    response, mask, logprobs = tokens["response_ids"], tokens["assistant_mask"], tokens["logprobs"]
    assert len(mask) == len(response) == len(logprobs) and len(tokens["turn_starts"]) == len(record["turns"])
    assert all(math.isfinite(lp) and lp <= 0.0 for lp in logprobs)
    assert all(lp == 0.0 for lp, m in zip(logprobs, mask, strict=True) if not m)

    messages = record["messages"]
    assistant_at = [k for k, m in enumerate(messages) if m["role"] == "assistant"]
    replay = ChatTokens(tokenizer, record["tools"])
    replay.reset(messages[:2])
    rendered_opening = tokenizer.apply_chat_template(
        [template_message(m) for m in messages[:2]], tools=record["tools"], add_generation_prompt=True, tokenize=False
    )
    assert tokenizer.decode(tokens["prompt_ids"]) == rendered_opening
    for t, (turn, start) in enumerate(zip(record["turns"], tokens["turn_starts"], strict=True)):
        generated = turn["completion_token_ids"]
        assert turn["prompt_token_ids"] == tokens["prompt_ids"] + response[:start] == replay.token_ids
        assert response[start : start + len(generated)] == generated and all(mask[start : start + len(generated)])
        assert logprobs[start : start + len(generated)] == turn["logprobs"]
        message = messages[assistant_at[t]]
        parsed = parse_turn(tokenizer.decode(generated, skip_special_tokens=True), "auto")
        assert parsed.content == message["content"]
        assert [c.name for c in parsed.calls] == [c["function"]["name"] for c in message.get("tool_calls", [])]
        end = assistant_at[t + 1] if t + 1 < len(assistant_at) else len(messages)
        env_ids = replay.sync(messages[:end], generated, turn["logprobs"])
        env_text = tokenizer.decode(env_ids)
        assert all(reply["content"] in env_text for reply in messages[assistant_at[t] + 1 : end])
    assert replay.trajectory() == tokens

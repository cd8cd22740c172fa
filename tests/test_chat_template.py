"""ChatTokens with a Qwen-like chat template on a tokenizer trained in the test (no downloads)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

pytest.importorskip("transformers", reason="the dev extra installs transformers")
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from ace_gym.chat_template import ChatTokens, template_message
from ace_gym.envs import AceEnv
from ace_gym.wrappers import ChatAdapter, ToolFailureInjection

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<think>", "</think>"]

# Qwen2.5-style: tools listed in the system turn, calls as <tool_call> JSON, consecutive tool
# replies grouped into one user turn of <tool_response> blocks, reasoning rendered as <think>.
QWEN_LIKE = """
{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}

{% endif %}# Tools

<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools>

For each function call, return a json object within <tool_call></tool_call> tags.<|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'user' %}<|im_start|>user
{{ message.content }}<|im_end|>
{% elif message.role == 'assistant' %}<|im_start|>assistant
{% if message.reasoning_content %}<think>
{{ message.reasoning_content }}
</think>

{% endif %}{{ message.content }}
{%- for call in message.tool_calls or [] %}
<tool_call>
{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% elif message.role == 'tool' %}
{%- if messages[loop.index0 - 1].role != 'tool' %}<|im_start|>user{% endif %}
<tool_response>
{{ message.content }}
</tool_response>
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}<|im_end|>
{% endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

# Like Qwen3: reasoning is only rendered for assistant turns after the last user message, so a
# new user message rewrites earlier turns (not prefix-stable).
DROPS_OLD_REASONING = QWEN_LIKE.replace(
    "{% if message.reasoning_content %}",
    "{% if message.reasoning_content and messages[loop.index0:] | selectattr('role', 'equalto', 'user') | list | length == 0 %}",
)


def _tokenizer(template: str) -> Any:
    corpus = [
        AceEnv("course").reset(options={"instance_index": 3})[1]["system_prompt"],
        '{"status": "success", "messages": "Successfully executed tool", "data": {"row": 1, "col": 2}}',
        '<tool_call>\n{"name": "set_slot", "arguments": {"row": 1, "col": 2, "id": "C1"}}\n</tool_call>',
        "Let me check the grid state first. Zürich 日本料理 café",
    ]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator(corpus * 5, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = template
    return tokenizer


@pytest.fixture(scope="module")
def qwen_like() -> Any:
    return _tokenizer(QWEN_LIKE)


TURNS = [
    '<think>Look first.</think>I will look.\n<tool_call>\n{"name": "get_current_grid_state", "arguments": {}}\n</tool_call>',
    '<tool_call>\n{"name": "get_slot_id", "arguments": {"row": 0, "col": 0}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_global_check_budget", "arguments": {}}\n</tool_call>',
    "I am not sure; thinking about Zürich.",  # no call: a corrective user message follows
    '<tool_call>\n{"name": "set_slot", "arguments": {"row": 0, "col": 0, "id": "日本"}}\n</tool_call>',
]


def _rollout(tokenizer: Any) -> tuple[ChatTokens, ChatAdapter]:
    env = ChatAdapter(ToolFailureInjection(AceEnv("course"), 0.2))
    messages, info = env.reset(seed=1, options={"instance_index": 3})
    tokens = ChatTokens(tokenizer, tools=info["tools"])
    tokens.reset(messages)
    for text in TURNS:
        _, _, _, _, info = env.step(text)
        tokens.sync(info["messages"])
    return tokens, env


def test_append_only_ids__equal_a_fresh_tokenisation_of_the_whole_conversation(qwen_like: Any) -> None:
    tokens, env = _rollout(qwen_like)
    assert tokens.prefix_stable and tokens.verify()
    rendered = qwen_like.apply_chat_template(
        [template_message(m) for m in env.messages], tools=tokens.tools, add_generation_prompt=True, tokenize=False
    )
    assert tokens.token_ids == qwen_like.encode(rendered, add_special_tokens=False)
    assert "<tools>" in rendered and '"name": "set_slot"' in rendered and "<think>\nLook first.\n</think>" in rendered
    assert [s.kind for s in tokens.segments] == ["prompt"] + ["assistant", "env"] * len(TURNS)


def test_each_turn__tokenises_only_its_own_suffix(qwen_like: Any) -> None:
    tokens, _ = _rollout(qwen_like)
    lengths = [len(s.token_ids) for s in tokens.segments]
    assert sum(lengths) == len(tokens.token_ids)
    assert all(length < lengths[0] for length in lengths[1:])  # no turn re-tokenised the long system prompt
    mask = tokens.assistant_mask()
    assert len(mask) == len(tokens.token_ids) and 0 < sum(mask) < len(mask)


def test_generated_ids__are_kept_verbatim_and_closed_by_the_template(qwen_like: Any) -> None:
    env = ChatAdapter(AceEnv("course"))
    messages, info = env.reset(seed=0, options={"instance_index": 3})
    tokens = ChatTokens(qwen_like, tools=info["tools"])
    prompt = tokens.reset(messages)
    # what the template itself writes for this turn, as a model would have generated it (+ <|im_end|>)
    text = '<tool_call>\n{"name": "get_global_check_budget", "arguments": {}}\n</tool_call>'
    generated = qwen_like.encode(text + "<|im_end|>", add_special_tokens=False)
    _, _, _, _, info = env.step(text)
    env_ids = tokens.sync(info["messages"], generated_ids=generated)
    assert tokens.token_ids == prompt + generated + env_ids
    assert qwen_like.decode(env_ids).startswith("\n<|im_start|>user")  # the "\\n" closing the assistant turn
    assert tokens.verify()


def test_template_that_rewrites_history__falls_back_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    tokenizer = _tokenizer(DROPS_OLD_REASONING)
    with caplog.at_level(logging.WARNING, logger="ace_gym.chat_template"):
        tokens, env = _rollout(tokenizer)
    assert not tokens.prefix_stable
    assert sum("not prefix-stable" in r.message for r in caplog.records) == 1
    rendered = tokenizer.apply_chat_template(
        [template_message(m) for m in env.messages], tools=tokens.tools, add_generation_prompt=True, tokenize=False
    )
    assert tokens.token_ids == tokenizer.encode(rendered, add_special_tokens=False)


def test_template_message__decodes_json_string_arguments_only_into_objects() -> None:
    message = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "x", "arguments": '{"row": 1}'}},
            {"id": "b", "type": "function", "function": {"name": "y", "arguments": "[1, 2]"}},
        ],
    }
    converted = template_message(message)
    assert [c["function"]["arguments"] for c in converted["tool_calls"]] == [{"row": 1}, "[1, 2]"]
    assert message["tool_calls"][0]["function"]["arguments"] == '{"row": 1}'  # input left untouched


def test_trajectory__lays_out_prompt_response_mask_logprobs_and_turn_starts(qwen_like: Any) -> None:
    env = ChatAdapter(AceEnv("course"))
    messages, info = env.reset(seed=0, options={"instance_index": 3})
    tokens = ChatTokens(qwen_like, tools=info["tools"])
    prompt = tokens.reset(messages)
    generated = []
    for turn, text in enumerate(TURNS[:2]):
        ids = qwen_like.encode(text + "<|im_end|>", add_special_tokens=False)
        logprobs = [-(turn + 1) / (k + 1) for k in range(len(ids))]
        _, _, _, _, info = env.step(text)
        env_ids = tokens.sync(info["messages"], generated_ids=ids, logprobs=logprobs)
        generated.append((ids, logprobs, env_ids))
    trajectory = tokens.trajectory()
    assert trajectory is not None and trajectory["prompt_ids"] == prompt
    assert prompt + trajectory["response_ids"] == tokens.token_ids
    (ids0, lp0, env0), (ids1, lp1, env1) = generated
    assert trajectory["response_ids"] == ids0 + env0 + ids1 + env1
    assert trajectory["assistant_mask"] == [1] * len(ids0) + [0] * len(env0) + [1] * len(ids1) + [0] * len(env1)
    assert trajectory["logprobs"] == lp0 + [0.0] * len(env0) + lp1 + [0.0] * len(env1)
    assert trajectory["turn_starts"] == [0, len(ids0) + len(env0)]
    trimmed = tokens.trajectory(through_last_turn=True)
    assert trimmed is not None and trimmed["response_ids"] == ids0 + env0 + ids1
    assert trimmed["logprobs"] == lp0 + [0.0] * len(env0) + lp1


def test_trajectory__has_no_logprobs_unless_every_turn_had_them_and_no_layout_without_prefix_stability(
    qwen_like: Any,
) -> None:
    tokens, _ = _rollout(qwen_like)  # turns rendered by the template: no model logprobs
    trajectory = tokens.trajectory()
    assert trajectory is not None and trajectory["logprobs"] is None
    assert trajectory["assistant_mask"] == tokens.assistant_mask()[len(trajectory["prompt_ids"]) :]
    with pytest.raises(ValueError, match="one log-probability per id"):
        tokens.add_turn({"role": "assistant", "content": "x"}, [], generated_ids=[1, 2], logprobs=[-1.0])
    rewriting, _ = _rollout(_tokenizer(DROPS_OLD_REASONING))
    assert rewriting.trajectory() is None


def test_several_tool_messages_after_one_assistant_turn__one_env_segment_equal_to_the_rendering() -> None:
    """The batching solver under FIT (compact replies), on Qwen2.5's own template: each assistant
    turn makes several calls (written as that template writes them, one ``<tool_call>`` block per
    line), the adapter answers each with its own tool message, and the template groups them into
    one user turn; the append-only ids, the model's kept verbatim, stay the whole conversation's
    rendering, turn after turn."""
    from ace_gym.agents.llm.tiny_model import CHAT_TEMPLATE_FILE
    from ace_gym.eval import EpisodeSpec
    from ace_gym.eval.fit import fit_spec
    from tests.solver_text import BatchSolverText

    qwen = _tokenizer(CHAT_TEMPLATE_FILE.read_text(encoding="utf-8"))
    spec = fit_spec(EpisodeSpec.of("course", instance_index=9, seed=4))  # H=5
    env = ChatAdapter(AceEnv(**spec.stack.env_kwargs))
    messages, info = env.reset(seed=spec.seed, options=spec.reset_options())
    tokens = ChatTokens(qwen, tools=info["tools"])
    tokens.reset(messages)
    solver = BatchSolverText(spec)
    replies: list[str] = []
    terminated = False
    while not terminated:
        text = solver.next_text(replies)
        generated = qwen.encode(text + "<|im_end|>", add_special_tokens=False)
        _, _, terminated, _, info = env.step(text)
        env_ids = tokens.sync(info["messages"], generated_ids=generated)
        last = max(k for k, m in enumerate(info["messages"]) if m["role"] == "assistant")
        replies = [m["content"] for m in info["messages"][last + 1 :] if m["role"] == "tool"]
        assert len(replies) == solver.calls[-1]  # one tool message per call (done's included)
        env_text = qwen.decode(env_ids)  # the turn's replies: one user turn, a <tool_response> block per call
        assert env_text.count("<|im_start|>user") == 1 and env_text.count("<tool_response>") == len(replies)
        assert all(reply in env_text for reply in replies)
        rendered = qwen.apply_chat_template(
            [template_message(m) for m in env.messages], tools=tokens.tools, add_generation_prompt=True, tokenize=False
        )
        assert tokens.token_ids == qwen.encode(rendered, add_special_tokens=False)
    assert info["score"] == 1.0 and max(solver.calls) > 1 and len(solver.calls) <= 5
    assert [s.kind for s in tokens.segments] == ["prompt"] + ["assistant", "env"] * len(solver.calls)
    trajectory = tokens.trajectory(through_last_turn=True)
    assert trajectory is not None and len(trajectory["turn_starts"]) == len(solver.calls)

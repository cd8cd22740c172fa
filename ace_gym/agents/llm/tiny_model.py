"""A tiny random Llama with a small ACE-trained tokenizer, built locally (no downloads).

For tests, examples and benchmarks of the LLM engines: the model is untrained, so it produces
noise and scores 0, but it exercises every code path a real model does (chat template with
tools, batched generation, token ids, vLLM loading). The tokenizer is a byte-level BPE trained
on the ACE prompts and tool schemas of every domain, so any text encodes and an ACE prompt is a
few thousand tokens. The chat template is ChatML with Hermes-style ``<tool_call>`` blocks.

Requires ``transformers``, ``tokenizers`` and ``torch`` (the ``hf`` extra).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

CHAT_TEMPLATE = (
    "{% if messages[0].role == 'system' %}{% set system = messages[0].content %}"
    "{% set rest = messages[1:] %}{% else %}{% set system = '' %}{% set rest = messages %}{% endif %}"
    "<|im_start|>system\n{{ system }}"
    "{% if tools %}\n\n# Tools\n<tools>\n{% for tool in tools %}\n{{ tool | tojson }}{% endfor %}\n</tools>\n"
    'Call a tool with <tool_call>{"name": NAME, "arguments": {...}}</tool_call>.{% endif %}'
    "<|im_end|>\n"
    "{% for message in rest %}"
    "{% if message.role == 'assistant' %}<|im_start|>assistant\n"
    "{% if message.reasoning_content %}<think>{{ message.reasoning_content }}</think>{% endif %}"
    "{{ message.content or '' }}"
    "{% for call in message.tool_calls or [] %}"
    '<tool_call>{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}</tool_call>'
    "{% endfor %}<|im_end|>\n"
    "{% else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""ChatML with tools in the system turn and Hermes ``<tool_call>`` blocks (what the adapter parses)."""

SPECIAL_TOKENS = ("<|pad|>", "<|im_start|>", "<|im_end|>")
"""Control tokens (dropped when decoding with ``skip_special_tokens``)."""
MARKUP_TOKENS = ("<tool_call>", "</tool_call>", "<think>", "</think>")
"""Single tokens kept in decoded text, as in Qwen-style tokenizers (the adapter parses them)."""


def _tokenizer_corpus() -> list[str]:
    """ACE text of every domain (system prompt, first user message, tool schemas, a tool call)."""
    from ace_gym.domains import DOMAIN_NAMES
    from ace_gym.envs import AceEnv

    corpus = []
    for domain in DOMAIN_NAMES:
        env = AceEnv(domain)
        for index in range(3):
            observation, info = env.reset(options={"instance_index": index})
            corpus += [info["system_prompt"], observation, json.dumps(info["tools"])]
        corpus.append('<tool_call>{"name": "set_slot", "arguments": {"row": 1, "col": 2, "item_id": "C1"}}</tool_call>')
    return corpus


def build_tiny_model(
    path: str | os.PathLike[str],
    *,
    seed: int = 0,
    vocab_size: int = 2048,
    hidden_size: int = 128,
    num_layers: int = 2,
    max_positions: int = 16384,
) -> Path:
    """Build a random Llama + tokenizer with chat template and ``save_pretrained`` both to ``path``.

    The weights are a pure function of ``seed`` (drawn under a forked torch RNG, so the caller's
    global RNG state is untouched). Attention heads are 64 wide (the vLLM CPU backend rejects
    smaller heads). Saved in float32. Returns ``path`` as a Path.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    path = Path(path)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_tokenizer_corpus(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        pad_token="<|pad|>",
        eos_token="<|im_end|>",
        bos_token="<|im_start|>",
        padding_side="left",
    )
    tokenizer.add_tokens(list(MARKUP_TOKENS))
    tokenizer.chat_template = CHAT_TEMPLATE

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=hidden_size // 64,
        num_key_value_heads=hidden_size // 64,
        head_dim=64,
        max_position_embeddings=max_positions,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
        dtype="float32",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path

"""A tiny random Llama with a small ACE-trained tokenizer, built locally (no downloads).

For tests, examples and benchmarks of the LLM engines and trainers: the model is untrained, so it
produces noise and scores 0, but it exercises every code path a real model does (chat template
with tools, batched generation, token ids and logprobs, vLLM loading, TRL's tool-calling loop).
The tokenizer is a byte-level BPE trained on the ACE prompts and tool schemas of every domain
rendered by the chat template, so any text encodes and an ACE prompt is a few thousand tokens.
The chat template is Qwen2.5's (:data:`CHAT_TEMPLATE_FILE`).

Requires ``transformers``, ``tokenizers`` and ``torch`` (the ``hf`` extra).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

CHAT_TEMPLATE_FILE = Path(__file__).with_name("qwen2_5_chat_template.jinja")
"""Qwen2.5's chat template, byte for byte (Apache-2.0, Alibaba Cloud): tools in the system turn,
Hermes ``<tool_call>`` blocks, tool replies as ``<tool_response>`` in a user turn. Trainers recognise
it by its exact text (TRL parses tool calls and runs ``environment_factory`` only for templates it
knows), and it is prefix-stable, so :class:`~ace_gym.chat_template.ChatTokens` never re-tokenises."""

SPECIAL_TOKENS = ("<|pad|>", "<|im_start|>", "<|im_end|>")
"""Control tokens (dropped when decoding with ``skip_special_tokens``)."""
MARKUP_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>")
"""Single tokens kept in decoded text, as in Qwen-style tokenizers (the adapter parses them)."""


def _tokenizer_corpus() -> list[str]:
    """ACE text of every domain (system prompt, first user message, tool schemas, a tool call) and
    the chat template's own text."""
    from ace_gym.domains import DOMAIN_NAMES
    from ace_gym.envs import AceEnv

    corpus = []
    for domain in DOMAIN_NAMES:
        env = AceEnv(domain)
        for index in range(3):
            observation, info = env.reset(options={"instance_index": index})
            corpus += [info["system_prompt"], observation, json.dumps(info["tools"])]
        corpus.append('<tool_call>\n{"name": "set_slot", "arguments": {"row": 1, "col": 2, "id": "C1"}}\n</tool_call>')
    return [*corpus, CHAT_TEMPLATE_FILE.read_text(encoding="utf-8")]


def build_tiny_model(
    path: str | os.PathLike[str],
    *,
    seed: int = 0,
    vocab_size: int = 2048,
    hidden_size: int = 128,
    num_layers: int = 2,
    max_positions: int = 16384,
    corpus: Sequence[str] = (),
    split_words: bool = True,
    max_token_length: int | None = None,
    split_digits: bool = False,
    whole_tokens: Sequence[str] = (),
) -> Path:
    """Build a random Llama + tokenizer with chat template and ``save_pretrained`` both to ``path``.

    ``corpus``: more texts the tokenizer is trained on, besides the ACE text of every domain (say
    the rendered conversations a model will be trained on, so they take fewer tokens).
    ``split_words=False`` lets merges cross word boundaries (the byte-level pre-tokeniser does not
    split the text first), so repeated phrases such as a system prompt become a few long tokens;
    ``max_token_length`` bounds a token's length in characters (None: unbounded).
    ``split_digits=True`` makes every digit a token of its own, never merged with its neighbours,
    so a number (a row, an item id) reads the same wherever it stands and a model copies it digit
    by digit.
    ``whole_tokens`` are strings that are always one token each, wherever they stand (say a
    domain's item ids: a model then copies an id as one token, and an id that appears in several
    tool replies is one token seen several times).

    The weights are a pure function of ``seed`` (drawn under a forked torch RNG, so the caller's
    global RNG state is untouched). Attention heads are 64 wide (the vLLM CPU backend rejects
    smaller heads). Saved in float32. Returns ``path`` as a Path.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    path = Path(path)
    bpe = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=split_words)
    bpe.pre_tokenizer = (
        pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
        if split_digits
        else byte_level
    )
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
        max_token_length=max_token_length,
    )
    bpe.train_from_iterator([*_tokenizer_corpus(), *corpus], trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        pad_token="<|pad|>",
        eos_token="<|im_end|>",
        bos_token="<|im_start|>",
        padding_side="left",
    )
    tokenizer.add_tokens(list(MARKUP_TOKENS))
    tokenizer.add_tokens(list(dict.fromkeys(whole_tokens)))
    tokenizer.chat_template = CHAT_TEMPLATE_FILE.read_text(encoding="utf-8")

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

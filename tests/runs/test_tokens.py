"""Token counting, buckets, and the lazy import of the AgentLongBench package."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ace_gym.errors import ConfigError
from ace_gym.runs.tokens import (
    BUCKETS,
    MESSAGE_OVERHEAD,
    ApproxTokenizer,
    Tokenizer,
    message_tokens,
    resolve_target_tokens,
    resolve_tokenizer,
)


def test_approx_tokenizer__counts_word_number_and_punctuation_pieces() -> None:
    count = ApproxTokenizer().count
    assert count("") == 0 and count("   ") == 0
    assert count("Item_84") == 3  # Item, _, 84
    assert count("Abomasnow") == 2  # six letters at most per piece
    assert count("1234567") == 3
    assert count('["A", "B"]') == 6  # pieces: [" A ", " B "]
    assert count("Result: wrong\n\nRemaining rounds: 3") == 9  # newline runs count once


def test_message_tokens__adds_tool_calls_and_the_overhead() -> None:
    tokenizer = ApproxTokenizer()
    call = {"function": {"name": "query_items", "arguments": '{"conditions": []}'}}
    message = {"role": "assistant", "content": "ok", "tool_calls": [call]}
    expected = MESSAGE_OVERHEAD + 1 + tokenizer.count("query_items") + tokenizer.count('{"conditions": []}')
    assert message_tokens(tokenizer, message) == expected


def test_resolve__tokenizers_and_budgets() -> None:
    assert isinstance(resolve_tokenizer(None), ApproxTokenizer) and isinstance(resolve_tokenizer("approx"), Tokenizer)

    class Words:
        def count(self, text: str) -> int:
            return len(text.split())

    words = Words()
    assert resolve_tokenizer(words) is words
    for bad in ("tiktoken", "hf:", 3):
        with pytest.raises(ConfigError):
            resolve_tokenizer(bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        resolve_tokenizer("hf:/no/such/dir")
    assert resolve_target_tokens("1m") == (1_048_576, "1M") and resolve_target_tokens(32768) == (32768, "32k")
    assert resolve_target_tokens(5000) == (5000, "5000") and list(BUCKETS)[-1] == "4M"
    for bad in ("3K", 0, True, 1.5):
        with pytest.raises(ConfigError):
            resolve_target_tokens(bad)  # type: ignore[arg-type]


def test_import_ace_gym__imports_only_the_longbench_declaration() -> None:
    declaration = ("ace_gym.longbench", "ace_gym.longbench.benchmark")  # plain data: its env ids and entry points
    code = "import sys, gymnasium as gym, ace_gym; assert 'ALB-QA-v0' in gym.registry; " + (
        f"assert not [m for m in sys.modules if m.startswith('ace_gym.longbench') and m not in {declaration!r}], 'imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

"""The tiny model's tokenizer options: an extra corpus, merges across words, a bounded token length."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ace_gym.agents.llm.tiny_model import build_tiny_model  # noqa: E402

PHRASE = "Each `null` value is a missing slot that still needs a valid item id."


def _tokenizer(path: Path, **options: object) -> object:
    build_tiny_model(path, vocab_size=1024, hidden_size=64, num_layers=1, **options)  # type: ignore[arg-type]
    return transformers.AutoTokenizer.from_pretrained(path)


def test_build_tiny_model__merges_across_words_within_the_token_length_and_decodes_exactly(tmp_path: Path) -> None:
    words = _tokenizer(tmp_path / "words", corpus=[PHRASE] * 50)
    across = _tokenizer(tmp_path / "across", corpus=[PHRASE] * 50, split_words=False)
    bounded = _tokenizer(tmp_path / "bounded", corpus=[PHRASE] * 50, split_words=False, max_token_length=8)
    for tokenizer in (words, across, bounded):
        assert tokenizer.decode(tokenizer.encode(PHRASE)) == PHRASE  # byte-level: any text round-trips
    assert len(across.encode(PHRASE)) < 5 < len(words.encode(PHRASE))  # word-split BPE needs a token per word
    pieces = bounded.convert_ids_to_tokens(bounded.encode(PHRASE))
    assert (
        max(len(piece) for piece in pieces)
        <= 8
        < max(len(p) for p in across.convert_ids_to_tokens(across.encode(PHRASE)))
    )
